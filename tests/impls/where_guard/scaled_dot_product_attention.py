"""torch.where with -inf, and a guard row-wise, for any leading dims."""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scores = torch.matmul(queries, keys.transpose(-1, -2)) / math.sqrt(keys.shape[-1])
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        mask = mask.expand(scores.shape)
        any_key = mask.any(dim=-1, keepdim=True)
        guarded = torch.where(mask, scores, torch.full_like(scores, -math.inf))
        guarded = torch.where(any_key, guarded, torch.zeros_like(scores))
        weights = torch.where(mask, torch.softmax(guarded, dim=-1), torch.zeros_like(scores))
    return torch.matmul(weights, values), weights
