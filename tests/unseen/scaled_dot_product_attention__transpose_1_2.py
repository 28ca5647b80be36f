"""BUG: d2l's keys.transpose(1, 2): right for 3-D inputs, wrong for 2-D and 4-D
STYLE: d2l.ai DotProductAttention
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    # d2l.ai DotProductAttention: torch.bmm(queries, keys.transpose(1, 2))
    d = queries.shape[-1]
    scores = torch.matmul(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e30)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return torch.matmul(weights, values), weights
