"""BUG: none
STYLE: MPT's gen_slopes and build_alibi_bias (|kcoord - qcoord|), einsum, float64 inside
"""
"""ALiBi in the style of MosaicML's MPT (gen_slopes / build_alibi_bias), with einsum and a
float64 softmax, cast back to the inputs' dtype.

MPT's causal bias is slope * (j - (Tk - 1)) (0 on the last key), a per-row constant away from
-slope * (pos(i) - j); its "full" (non-causal) bias is -slope * |(j - Tk + 1) - (i - Tq + 1)|,
i.e. -slope * |j - pos(i)| with bottom-right query positions.
"""
import math

import torch


def alibi_slopes(num_heads, alibi_bias_max=8):
    if type(num_heads) is not int or num_heads < 1:
        raise ValueError("num_heads must be an int >= 1")
    _n_heads = 2 ** math.ceil(math.log2(num_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float64)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != num_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def _build_alibi_bias(slopes, Tq, Tk, full, device):
    kcoord = torch.arange(1 - Tk, 1, dtype=torch.float64, device=device).view(1, 1, 1, Tk)
    if full:
        qcoord = torch.arange(1 - Tq, 1, dtype=torch.float64, device=device).view(1, 1, Tq, 1)
        bias = (kcoord - qcoord).abs().mul(-1)
    else:
        bias = kcoord
    return bias * slopes.view(1, -1, 1, 1)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dev = queries.device
    sl = alibi_slopes(H) if slopes is None else slopes
    sl = sl.to(device=dev, dtype=queries.dtype).to(torch.float64)

    q, k, v = (t.to(torch.float64) for t in (queries, keys, values))
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(d))
    scores = scores + _build_alibi_bias(sl, Tq, Tk, not is_causal, dev)

    keep = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        keep = keep & torch.ones(Tq, Tk, dtype=torch.bool, device=dev).tril(Tk - Tq)
    if mask is not None:
        keep = keep & mask.to(dev)
    neg_inf = torch.tensor(float("-inf"), dtype=torch.float64, device=dev)
    masked = torch.where(keep, scores, neg_inf)
    row_max = masked.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isneginf(row_max), torch.zeros_like(row_max), row_max)
    ex = torch.where(keep, torch.exp(masked - row_max), torch.zeros_like(masked))
    total = ex.sum(-1, keepdim=True)
    attn = ex / torch.where(total == 0, torch.ones_like(total), total)
    out = torch.einsum("bhqk,bhkd->bhqd", attn, v)
    return out.to(queries.dtype), attn.to(queries.dtype)
