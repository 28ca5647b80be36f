"""BUG: none
STYLE: the PyTorch docs' reference with an attn_bias, and a softmax safe on empty rows
"""
"""After the reference implementation in the PyTorch docs of F.scaled_dot_product_attention,
with the -inf bias made safe for rows that allow no key."""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    L, S = queries.size(-2), keys.size(-2)
    scale_factor = 1 / math.sqrt(queries.size(-1))
    attn_bias = torch.zeros(L, S, dtype=queries.dtype, device=queries.device)
    if mask is not None:
        attn_bias = attn_bias.masked_fill(mask.logical_not(), float("-inf"))
    attn_weight = queries @ keys.transpose(-2, -1) * scale_factor
    attn_weight = attn_weight + attn_bias
    # softmax by hand so that an all -inf row gives zeros instead of NaN
    row_max = attn_weight.amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    numer = torch.exp(attn_weight - row_max)
    denom = numer.sum(dim=-1, keepdim=True)
    attn_weight = numer / torch.where(denom == 0, torch.ones_like(denom), denom)
    return attn_weight @ values, attn_weight
