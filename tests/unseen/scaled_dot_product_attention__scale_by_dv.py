"""BUG: scales the scores by sqrt(dv) = sqrt(values.shape[-1]) instead of sqrt(d); wrong whenever dv != d (any input with a value size different from the key size).
STAGE: the scale
STYLE: d2l.ai DotProductAttention ported to bool masks (torch.bmm-like matmul, masked_fill)
"""
import math
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = values.shape[-1]
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float('-inf'))
        has_key = mask.any(dim=-1, keepdim=True)
        scores = torch.where(has_key, scores, torch.zeros_like(scores))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * has_key.to(weights.dtype)
    return torch.matmul(weights, values), weights
