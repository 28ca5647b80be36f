"""STYLE: Annotated-Transformer-like attention() with a boolean mask, written with nn.MultiheadAttention's key_padding_mask convention in mind
BUG: the boolean mask is read as True = blocked (nn.MultiheadAttention's convention) instead of True = may attend.
STAGE: masked scores
WHEN: a mask is given (any mask with a False entry)
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d_k = queries.size(-1)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        p_attn = p_attn.masked_fill(mask, 0.0)
    return torch.matmul(p_attn, values), p_attn
