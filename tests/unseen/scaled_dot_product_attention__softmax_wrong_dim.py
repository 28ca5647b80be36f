"""BUG: normalises over the query axis (dim=-2) instead of over the keys.
STAGE: the softmax
"""
import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d_k = queries.size(-1)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    attn = F.softmax(scores, dim=-2)
    attn = torch.nan_to_num(attn, nan=0.0)
    return torch.matmul(attn, values), attn
