"""BUG: none
STYLE: MPT's ALiBi: the slopes by its own formula, the bias built from arange(1 - Tk, 1) and added to the scores.
"""
import math
import torch


def alibi_slopes(num_heads):
    """MPT's gen_slopes (alibi_bias_max=8), float64."""
    if type(num_heads) is not int or num_heads < 1:
        raise ValueError("num_heads must be an int >= 1")
    _n_heads = 2 ** math.ceil(math.log2(num_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float64) * (8 / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != num_heads:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    b, h, tq, d = queries.shape
    tk = keys.shape[-2]
    dev = queries.device
    wd = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    sl = (alibi_slopes(h) if slopes is None else slopes).to(queries.dtype).to(device=dev, dtype=wd)
    # MPT: key offsets 1-Tk..0, query offsets 1-Tq..0 (both bottom-right aligned)
    kb = torch.arange(1 - tk, 1, device=dev).view(1, tk)
    if is_causal:
        rel = kb.expand(tq, tk)
    else:
        rel = -(kb - torch.arange(1 - tq, 1, device=dev).view(tq, 1)).abs()
    bias = torch.einsum("h,qk->hqk", sl, rel.to(wd))
    s = torch.einsum("bhqd,bhkd->bhqk", queries.to(wd), keys.to(wd)) * (1.0 / math.sqrt(d)) + bias
    allow = torch.ones((), dtype=torch.bool, device=dev)
    if is_causal:
        allow = torch.ones(tq, tk, dtype=torch.bool, device=dev).tril(tk - tq)
    if mask is not None:
        allow = torch.logical_and(allow, mask)
    allow = allow.expand(s.shape)
    s = torch.where(allow, s, float("-inf"))
    mxs = s.amax(-1, keepdim=True)
    mxs = torch.where(torch.isfinite(mxs), mxs, 0.0)
    e = torch.exp(s - mxs)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, 1.0)
    o = torch.einsum("bhqk,bhkv->bhqv", w, values.to(wd))
    return o.to(queries.dtype), w.to(queries.dtype)
