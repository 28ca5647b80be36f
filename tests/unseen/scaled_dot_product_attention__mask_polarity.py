"""BUG: mask polarity flipped: fills -inf where mask is True (minGPT's "bias == 0" idiom ported to a bool mask with the opposite convention). Differs on any input with a mask that is not all True.
STAGE: the mask
STYLE: nanoGPT / minGPT CausalSelfAttention manual path (att.masked_fill(..., float('-inf')))
"""
import math
import torch
import torch.nn.functional as F


def scaled_dot_product_attention(queries, keys, values, mask=None):
    att = (queries @ keys.transpose(-2, -1)) * (1.0 / math.sqrt(keys.size(-1)))
    if mask is not None:
        blocked = mask.expand_as(att)           # meant: positions to block
        att = att.masked_fill(blocked, float('-inf'))
        empty = blocked.all(dim=-1, keepdim=True)
        att = att.masked_fill(empty, 0.0)
        att = F.softmax(att, dim=-1)
        att = att.masked_fill(empty, 0.0)
    else:
        att = F.softmax(att, dim=-1)
    y = att @ values
    return y, att
