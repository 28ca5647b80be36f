"""BUG: alibi_slopes uses 2 ** -torch.linspace(1, 8, n), which equals the paper's slopes only for n = 8 (exponents step 7/(n-1) instead of 8/n, and n = 1 gives 1/2).
STAGE: the slopes (every head count but 8)
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be a positive int")
    return 2.0 ** (-torch.linspace(1.0, 8.0, num_heads, dtype=torch.float64))


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    b, h, s_q, d = queries.shape
    s_k = keys.shape[-2]
    orig = queries.dtype
    dtype = torch.float32 if orig in (torch.float16, torch.bfloat16) else orig
    if slopes is None:
        slopes = alibi_slopes(h)
    slopes = slopes.to(device=queries.device, dtype=orig).to(dtype)

    attn = queries.to(dtype).matmul(keys.to(dtype).transpose(-2, -1)) / math.sqrt(d)
    key_idx = torch.arange(1 - s_k, 1, device=queries.device).view(1, 1, 1, s_k)
    query_idx = torch.arange(1 - s_q, 1, device=queries.device).view(1, 1, s_q, 1)
    attn = attn + (key_idx - query_idx).abs().mul(-1).to(dtype) * slopes.view(1, h, 1, 1)

    keep = torch.ones(b, h, s_q, s_k, dtype=torch.bool, device=queries.device)
    if is_causal:
        keep = torch.tril(keep, diagonal=s_k - s_q)
    if mask is not None:
        keep = keep & mask.to(queries.device)
    attn = attn.masked_fill(~keep, torch.finfo(dtype).min)
    attn = torch.softmax(attn, dim=-1).masked_fill(~keep, 0.0)
    out = attn.matmul(values.to(dtype))
    return out.to(orig), attn.to(orig)
