"""BUG: none
STYLE: MosaicML MPT style: gen_slopes rounds the head count up to a power of two and
interleaves slopes[1::2] and slopes[::2]; the bias is built from a distance matrix with
torch.arange, abs() and mul(-1); causal mask with torch.tril(diagonal=Tk-Tq); masked_fill,
softmax, masked_fill(0).
"""
import math

import torch


def gen_slopes(n_heads, alibi_bias_max=8):
    _n_heads = 2 ** math.ceil(math.log2(n_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float64)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != n_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise ValueError("num_heads must be an int")
    if num_heads < 1:
        raise ValueError("num_heads must be at least 1")
    return gen_slopes(num_heads)


def build_alibi_bias(n_heads, q_len, k_len, slopes, device, dtype):
    key_idx = torch.arange(1 - k_len, 1, dtype=torch.int64, device=device).view(1, 1, 1, k_len)
    query_idx = torch.arange(1 - q_len, 1, dtype=torch.int64, device=device).view(1, 1, q_len, 1)
    # both ranges end at 0, so this aligns the last query with the last key (bottom right)
    alibi_bias = (key_idx - query_idx).abs().mul(-1).to(dtype)
    return alibi_bias * slopes.view(1, n_heads, 1, 1)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    b, h, s_q, d = queries.shape
    s_k = keys.shape[-2]
    orig = queries.dtype
    dtype = torch.float32 if orig in (torch.float16, torch.bfloat16) else orig
    if slopes is None:
        slopes = alibi_slopes(h)
    slopes = slopes.to(device=queries.device, dtype=orig).to(dtype)

    softmax_scale = 1 / math.sqrt(d)
    attn_weight = queries.to(dtype).matmul(keys.to(dtype).transpose(-2, -1)) * softmax_scale
    attn_weight = attn_weight + build_alibi_bias(h, s_q, s_k, slopes, queries.device, dtype)

    keep = torch.ones(b, h, s_q, s_k, dtype=torch.bool, device=queries.device)
    if is_causal:
        keep = keep & torch.tril(keep, diagonal=s_k - s_q)
    if mask is not None:
        keep = keep & mask.to(queries.device)
    min_val = torch.finfo(dtype).min
    attn_weight = attn_weight.masked_fill(~keep, min_val)
    attn_weight = torch.softmax(attn_weight, dim=-1)
    attn_weight = attn_weight.masked_fill(~keep, 0.0)
    out = attn_weight.matmul(values.to(dtype))
    return out.to(orig), attn_weight.to(orig)
