"""BUG: fills the positions where the mask is True (nn.MultiheadAttention's convention), so it hides exactly the keys that may be attended.
STAGE: the mask
"""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scale = queries.shape[-1] ** -0.5
    logits = torch.einsum("...qd,...kd->...qk", queries, keys) * scale
    if mask is None:
        weights = torch.softmax(logits, dim=-1)
    else:
        mask = mask.to(torch.bool)
        logits = logits.masked_fill(mask, float("-inf"))
        weights = torch.softmax(logits, dim=-1)
        any_allowed = (~mask).any(dim=-1, keepdim=True)
        weights = torch.where(any_allowed, weights, torch.zeros_like(weights))
    output = torch.einsum("...qk,...kv->...qv", weights, values)
    return output, weights
