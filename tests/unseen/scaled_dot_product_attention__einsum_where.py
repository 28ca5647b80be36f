"""BUG: none
STYLE: einsum everywhere, masks applied with torch.where before and after the softmax.
"""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scale = queries.shape[-1] ** -0.5
    logits = torch.einsum("...qd,...kd->...qk", queries, keys) * scale
    if mask is None:
        weights = torch.softmax(logits, dim=-1)
    else:
        mask = mask.to(torch.bool)
        neg_inf = torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device)
        logits = torch.where(mask, logits, neg_inf)
        weights = torch.softmax(logits, dim=-1)
        any_allowed = mask.any(dim=-1, keepdim=True)
        weights = torch.where(any_allowed, weights, torch.zeros_like(weights))
    output = torch.einsum("...qk,...kv->...qv", weights, values)
    return output, weights
