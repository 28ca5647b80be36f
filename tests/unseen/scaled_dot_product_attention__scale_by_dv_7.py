"""BUG: scaled by sqrt(dv) instead of sqrt(d): wrong where dv != d
STYLE: flattened bmm
"""
import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scale = 1.0 / math.sqrt(values.size(-1))
    scores = torch.matmul(queries, keys.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    p_attn = F.softmax(scores, dim=-1)
    if mask is not None:
        p_attn = p_attn * mask
    return torch.matmul(p_attn, values), p_attn
