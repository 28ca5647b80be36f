"""BUG: the Annotated Transformer's masked_fill(-1e9) with no zeroing: rows with no allowed key come out uniform
STYLE: the Annotated Transformer
"""
import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(queries, keys, values, mask=None):
    "Compute 'Scaled Dot Product Attention' (Annotated Transformer)"
    d_k = queries.size(-1)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    p_attn = F.softmax(scores, dim=-1)
    return torch.matmul(p_attn, values), p_attn
