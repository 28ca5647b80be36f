"""BUG: none
STYLE: the original Press et al. fairseq style: get_slopes with math.log2, start and ratio as a
Python list, the alibi buffer slopes * arange(maxpos) (slope * j) plus an additive -inf future
mask, and a softmax guarded against rows with no allowed key.
"""
import math

import torch


def get_slopes(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def alibi_slopes(num_heads):
    if type(num_heads) is bool or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be a positive int")
    return torch.tensor(get_slopes(num_heads), dtype=torch.float64)


def fill_with_neg_inf(t):
    return t.float().fill_(float("-inf")).type_as(t)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    bsz, attn_heads, tgt_len, head_dim = queries.shape
    src_len = keys.shape[2]
    in_dtype = queries.dtype
    dtype = torch.float32 if in_dtype in (torch.float16, torch.bfloat16) else in_dtype
    device = queries.device
    if slopes is None:
        slopes = alibi_slopes(attn_heads)
    slopes = slopes.to(device=device, dtype=in_dtype).to(dtype)

    scaling = head_dim ** -0.5
    attn_weights = torch.matmul(queries.to(dtype), keys.to(dtype).transpose(-1, -2)) * scaling

    offset = src_len - tgt_len
    if is_causal:
        alibi = slopes.unsqueeze(1).unsqueeze(1) * torch.arange(src_len, device=device, dtype=dtype)[None, None, :]
        future_mask = torch.triu(
            fill_with_neg_inf(torch.zeros(tgt_len, src_len, device=device, dtype=dtype)), 1 + offset
        )
        attn_weights = attn_weights + alibi.unsqueeze(0) + future_mask
    else:
        rel = (torch.arange(tgt_len, device=device)[:, None] + offset) - torch.arange(src_len, device=device)[None, :]
        alibi = -slopes[:, None, None] * rel.abs().to(dtype)
        attn_weights = attn_weights + alibi.unsqueeze(0)

    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask.to(device), float("-inf"))

    row_max = attn_weights.amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(attn_weights - row_max)
    denom = exp.sum(dim=-1, keepdim=True)
    attn_probs = exp / torch.where(denom > 0, denom, torch.ones_like(denom))
    attn = torch.matmul(attn_probs, values.to(dtype))
    return attn.to(in_dtype), attn_probs.to(in_dtype)
