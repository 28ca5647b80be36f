import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", queries, keys) / math.sqrt(queries.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return torch.einsum("...qk,...kv->...qv", weights, values), weights
