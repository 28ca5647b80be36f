"""BUG: none
STYLE: MPT style slopes (gen_slopes with alibi_bias_max=8: 1/2**m, then for a non power of two cat(slopes[1::2], slopes[::2])[:n]), float32. Attention as a loop over heads with a hand-written stable softmax (subtract the row max, exp, normalise), bias -slope*(pos-j) built from a distance matrix, absolute value for the non-causal case.
"""
import math
import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise ValueError("num_heads must be an int")
    if num_heads < 1:
        raise ValueError("num_heads must be >= 1")
    alibi_bias_max = 8
    n_heads_pow2 = 2 ** math.ceil(math.log2(num_heads))
    m = torch.arange(1, n_heads_pow2 + 1, dtype=torch.float32)
    m = m.mul(alibi_bias_max / n_heads_pow2)
    slopes = 1.0 / torch.pow(2, m)
    if n_heads_pow2 != num_heads:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(queries)
    scale = 1.0 / math.sqrt(d)

    q_idx = torch.arange(Tq, device=queries.device).view(Tq, 1) + Tk - Tq
    k_idx = torch.arange(Tk, device=queries.device).view(1, Tk)
    rel = (k_idx - q_idx).to(queries.dtype)  # j - pos(i)
    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device)
    if is_causal:
        allowed = k_idx <= q_idx
        dist_bias = rel  # = -(pos - j) on every allowed key
    else:
        dist_bias = -rel.abs()
    if mask is not None:
        allowed = allowed & mask
    allowed = torch.broadcast_to(allowed, (B, H, Tq, Tk))

    outs, ws = [], []
    for n in range(H):
        s = torch.matmul(queries[:, n], keys[:, n].transpose(-1, -2)) * scale
        s = s + slopes[n] * dist_bias
        a = allowed[:, n]
        s = torch.where(a, s, torch.full_like(s, -float("inf")))
        row_max = s.amax(dim=-1, keepdim=True)
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)).detach()
        e = torch.where(a, torch.exp(s - row_max), torch.zeros_like(s))
        den = e.sum(dim=-1, keepdim=True)
        w = e / torch.where(den > 0, den, torch.ones_like(den))
        ws.append(w)
        outs.append(torch.matmul(w, values[:, n]))
    return torch.stack(outs, dim=1), torch.stack(ws, dim=1)
