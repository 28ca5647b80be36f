"""BUG: none
STYLE: textbook einsum style with a Python loop over heads: closed-form slopes 2 ** (-8 (i+1) / n)
with the recursive non-power-of-two rule, per-head einsum scores, -slope * (pos(i) - j) (abs when
not causal), torch.where with -inf, and a hand-written safe softmax.
"""
import math

import torch


def _pow2_slopes(n):
    return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]


def alibi_slopes(num_heads):
    if not isinstance(num_heads, int) or isinstance(num_heads, bool):
        raise ValueError("num_heads must be an int")
    if num_heads <= 0:
        raise ValueError("num_heads must be positive")
    c = 1
    while c * 2 <= num_heads:
        c *= 2
    vals = _pow2_slopes(c)
    if c != num_heads:
        vals += _pow2_slopes(2 * c)[0::2][: num_heads - c]
    return torch.tensor(vals, dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[2]
    out_dtype = queries.dtype
    work = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(dev, out_dtype).to(work)

    q = queries.to(work)
    k = keys.to(work)
    v = values.to(work)
    pos = torch.arange(Tq, device=dev) + (Tk - Tq)
    j = torch.arange(Tk, device=dev)
    rel = (pos[:, None] - j[None, :]).to(work)  # pos(i) - j
    allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = allowed & (rel >= 0)
        dist = rel
    else:
        dist = rel.abs()
    if mask is not None:
        allowed = allowed & mask.to(dev)

    outs, ws = [], []
    for n in range(H):
        s = torch.einsum("bid,bjd->bij", q[:, n], k[:, n]) / math.sqrt(d)
        s = s - slopes[n] * dist
        a = allowed[:, n]
        s = torch.where(a, s, torch.full_like(s, float("-inf")))
        m = s.max(dim=-1, keepdim=True).values.detach()
        m = torch.nan_to_num(m, neginf=0.0)
        e = torch.exp(s - m)
        tot = e.sum(-1, keepdim=True)
        w = e / torch.where(tot > 0, tot, torch.ones_like(tot))
        ws.append(w)
        outs.append(torch.einsum("bij,bje->bie", w, v[:, n]))
    output = torch.stack(outs, dim=1)
    weights = torch.stack(ws, dim=1)
    return output.to(out_dtype), weights.to(out_dtype)
