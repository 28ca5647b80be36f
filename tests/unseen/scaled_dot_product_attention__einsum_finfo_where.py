"""BUG: none
STYLE: einsum, finfo.min, torch.where
"""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", queries, keys) * d ** -0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = torch.where(mask, weights, 0.0)
    out = torch.einsum("...qk,...kv->...qv", weights, values)
    return out, weights
