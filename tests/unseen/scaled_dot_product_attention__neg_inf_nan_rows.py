"""STYLE: PyTorch docs' reference implementation of F.scaled_dot_product_attention (float attn_bias with -inf)
BUG: masked keys get a -inf bias, so a row with no allowed key becomes NaN instead of all zeros.
STAGE: weights
WHEN: a mask with a row that allows no key
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    L, S = queries.size(-2), keys.size(-2)
    scale_factor = 1 / math.sqrt(queries.size(-1))
    attn_bias = torch.zeros(L, S, dtype=queries.dtype, device=queries.device)
    if mask is not None:
        if mask.dtype == torch.bool:
            attn_bias = attn_bias.masked_fill(mask.logical_not(), float("-inf"))
        else:
            attn_bias = attn_bias + mask
    attn_weight = queries @ keys.transpose(-2, -1) * scale_factor
    attn_weight = attn_weight + attn_bias
    attn_weight = torch.softmax(attn_weight, dim=-1)
    return attn_weight @ values, attn_weight
