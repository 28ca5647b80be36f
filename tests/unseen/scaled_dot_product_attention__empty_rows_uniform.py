"""BUG: masks with a -1e9 fill and never zeroes a row with no allowed key, so such a row gets uniform weights instead of zeros.
STAGE: the mask
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = queries.size(-1)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, values), p_attn
