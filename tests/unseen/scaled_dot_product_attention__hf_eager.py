"""BUG: none
STYLE: Hugging Face transformers eager_attention_forward (scaling = d**-0.5, additive float mask built from the bool mask with finfo.min, softmax with an explicit dtype), plus a guard for rows with no allowed key.
"""
import torch
from torch import nn


def _bool_to_additive(mask, dtype):
    # like transformers' _prepare_4d_attention_mask: 0.0 where attended, finfo.min elsewhere
    inverted = 1.0 - mask.to(dtype)
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scaling = queries.shape[-1] ** -0.5
    compute_dtype = torch.promote_types(queries.dtype, torch.float32)
    query = queries.to(compute_dtype)
    key = keys.to(compute_dtype)
    value = values.to(compute_dtype)

    attn_weights = torch.matmul(query, key.transpose(-2, -1)) * scaling
    if mask is not None:
        attn_weights = attn_weights + _bool_to_additive(mask, compute_dtype)

    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=compute_dtype)
    if mask is not None:
        # a row whose keys are all masked came out uniform: make it exactly zero
        has_key = mask.any(dim=-1, keepdim=True)
        attn_weights = torch.where(has_key, attn_weights, torch.zeros_like(attn_weights))

    attn_output = torch.matmul(attn_weights, value)
    return attn_output.to(queries.dtype), attn_weights.to(queries.dtype)
