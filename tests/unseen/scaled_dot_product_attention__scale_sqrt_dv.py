"""BUG: divides the scores by sqrt(dv), the value feature size, instead of sqrt(d).
STAGE: the scale
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d_k = values.size(-1)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)
        p_attn = p_attn.masked_fill(~has_key, 0.0)
    return torch.matmul(p_attn, values), p_attn
