"""BUG: scales the queries in place (queries.mul_) to save a multiply, which modifies the caller's tensor.
STAGE: the input queries
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.size(-1)
    with torch.no_grad():
        queries.mul_(1.0 / math.sqrt(d))  # fold the scale into q once
    scores = queries @ keys.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ values, weights
