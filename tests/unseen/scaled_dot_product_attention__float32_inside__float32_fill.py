"""Fills masked scores through a float32 tensor, so float64 weights carry float32 rounding."""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(queries.size(-1))
    scores = (scores.float() if scores.dtype == torch.float64 else scores).to(scores.dtype)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e30)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ values, weights
