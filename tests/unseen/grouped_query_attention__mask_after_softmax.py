"""BUG: takes the softmax over all keys and only then zeroes the masked weights, so the allowed weights are not renormalised and rows no longer sum to 1.
STAGE: the mask
"""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    num_q_heads = queries.size(1)
    num_kv_heads = keys.size(1)
    if num_q_heads % num_kv_heads != 0:
        raise ValueError("number of query heads must be divisible by number of key/value heads")
    group_size = num_q_heads // num_kv_heads
    scale = 1.0 / math.sqrt(queries.size(-1))

    head_scores = []
    for n in range(num_q_heads):
        kv = n // group_size
        head_scores.append(queries[:, n] @ keys[:, kv].transpose(-2, -1) * scale)  # (B, Tq, Tk)
    scores = torch.stack(head_scores, dim=1)  # (B, Hq, Tq, Tk)

    if mask is not None:
        weights = torch.softmax(scores, dim=-1)
        weights = weights.masked_fill(mask.logical_not(), 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)

    outputs = [weights[:, n] @ values[:, n // group_size] for n in range(num_q_heads)]
    return torch.stack(outputs, dim=1), weights
