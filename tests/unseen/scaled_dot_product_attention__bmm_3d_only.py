"""BUG: D2L-style torch.bmm with keys.transpose(1, 2) only works for 3-D inputs; 2-D and 4-D inputs raise.
STAGE: the scores
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        attention_weights = torch.softmax(scores, dim=-1)
        attention_weights = attention_weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    else:
        attention_weights = torch.softmax(scores, dim=-1)
    return torch.bmm(attention_weights, values), attention_weights
