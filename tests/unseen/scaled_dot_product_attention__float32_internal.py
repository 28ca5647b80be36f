"""BUG: always computes in float32 ("for speed") and casts back, so float64 inputs lose precision.
STAGE: the scores
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    in_dtype = queries.dtype
    q, k, v = queries.float(), keys.float(), values.float()
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    out = torch.matmul(weights, v)
    return out.to(in_dtype), weights.to(in_dtype)
