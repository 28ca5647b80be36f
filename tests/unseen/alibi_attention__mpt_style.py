"""BUG: none
STYLE: MosaicML MPT (gen_slopes with the interleave trick for non powers of two, build_alibi_bias with arange(1-S,1) and abs().mul(-1)), -inf masking and a where on empty rows
"""
import math

import torch


def alibi_slopes(num_heads, alibi_bias_max=8):
    if type(num_heads) is not int or num_heads < 1:
        raise ValueError("num_heads must be an int >= 1")
    _n_heads = 2 ** math.ceil(math.log2(num_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float32)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != num_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def _build_alibi_bias(n_heads, seq_len_q, seq_len_k, slopes, full, device, dtype):
    alibi_bias = torch.arange(1 - seq_len_k, 1, dtype=torch.int64, device=device).view(1, 1, 1, seq_len_k)
    if full:
        alibi_bias = alibi_bias - torch.arange(1 - seq_len_q, 1, dtype=torch.int64, device=device).view(1, 1, seq_len_q, 1)
        alibi_bias = alibi_bias.abs().mul(-1)
    alibi_bias = alibi_bias.to(dtype) * slopes.view(1, n_heads, 1, 1)
    return alibi_bias


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    b, h, s_q, d = queries.shape
    s_k = keys.shape[2]
    if slopes is None:
        slopes = alibi_slopes(h)
    slopes = slopes.to(device=queries.device, dtype=queries.dtype)
    # full (symmetric) bias in both modes: under the causal mask it equals -slope * (pos - j)
    bias = _build_alibi_bias(h, s_q, s_k, slopes, True, queries.device, queries.dtype)
    attn_weight = queries.matmul(keys.transpose(-1, -2)) * (1.0 / math.sqrt(d))
    attn_weight = attn_weight + bias
    keep = torch.ones((1, 1, s_q, s_k), dtype=torch.bool, device=queries.device)
    if is_causal:
        keep = torch.ones((s_q, s_k), dtype=torch.bool, device=queries.device).tril(s_k - s_q).view(1, 1, s_q, s_k)
    if mask is not None:
        keep = keep & mask
    attn_weight = attn_weight.masked_fill(~keep, float("-inf"))
    probs = torch.softmax(attn_weight, dim=-1)
    probs = torch.where(keep.any(dim=-1, keepdim=True), probs, torch.zeros((), dtype=probs.dtype, device=probs.device))
    probs = probs.expand(b, h, s_q, s_k)
    out = probs.matmul(values)
    return out, probs
