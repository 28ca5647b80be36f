"""exp(log_softmax), a finite fill, and the mask multiplied out."""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", queries, keys) / d ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.log_softmax(-1).exp()
    if mask is not None:
        weights = weights * mask
    return torch.einsum("...qk,...kv->...qv", weights, values), weights
