"""BUG: softmax always taken in float32 and cast back (transformers' softmax(..., dtype=torch.float32) .to(query.dtype)): float64 inputs get float32-accurate weights (~1e-8 error), failing float64 parity.
STAGE: the weights
STYLE: Hugging Face transformers eager_attention_forward, verbatim softmax line
"""
import torch
from torch import nn


def scaled_dot_product_attention(queries, keys, values, mask=None):
    scaling = queries.shape[-1] ** -0.5
    attn_weights = torch.matmul(queries, keys.transpose(2, 3) if queries.dim() == 4 else keys.transpose(-2, -1)) * scaling
    if mask is not None:
        min_val = torch.finfo(attn_weights.dtype).min
        attn_weights = attn_weights.masked_fill(~mask, min_val)
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(queries.dtype)
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    attn_output = torch.matmul(attn_weights, values)
    return attn_output, attn_weights
