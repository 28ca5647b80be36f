"""BUG: the ALiBi bias is added to the raw q . k before the 1/sqrt(d) scaling, so the effective slope is slopes[n] / sqrt(d).
STAGE: the bias (scaled together with the scores)
"""
import math

import torch


def gen_slopes(n_heads, alibi_bias_max=8):
    _n_heads = 2 ** math.ceil(math.log2(n_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float64).mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != n_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be a positive int")
    return gen_slopes(num_heads)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    b, h, s_q, d = queries.shape
    s_k = keys.shape[-2]
    orig = queries.dtype
    dtype = torch.float32 if orig in (torch.float16, torch.bfloat16) else orig
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(h)
    slopes = slopes.to(device=dev, dtype=orig).to(dtype)

    pos = torch.arange(s_q, device=dev) + (s_k - s_q)
    j = torch.arange(s_k, device=dev)
    bias = -(pos[:, None] - j[None, :]).abs().to(dtype) * slopes.view(1, h, 1, 1)
    logits = queries.to(dtype) @ keys.to(dtype).transpose(-2, -1)
    attn = (logits + bias) / math.sqrt(d)

    keep = torch.ones(b, h, s_q, s_k, dtype=torch.bool, device=dev)
    if is_causal:
        keep = keep & (j[None, :] <= pos[:, None])
    if mask is not None:
        keep = keep & mask.to(dev)
    attn = attn.masked_fill(~keep, torch.finfo(dtype).min)
    attn = torch.softmax(attn, dim=-1).masked_fill(~keep, 0.0)
    out = attn @ values.to(dtype)
    return out.to(orig), attn.to(orig)
