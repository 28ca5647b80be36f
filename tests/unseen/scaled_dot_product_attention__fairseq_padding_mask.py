"""STYLE: fairseq MultiheadAttention core (q pre-multiplied by self.scaling, key_padding_mask filled, utils.softmax in float)
BUG: The mask is used with fairseq's key_padding_mask convention (True = padding, filled out), the opposite of the contract's True = attend.
STAGE: masked scores
WHEN: Any mask that is not all True (an all-True mask zeroes every row).
"""
import torch
import torch.nn.functional as F


def softmax(x, dim, onnx_trace=False):
    if onnx_trace:
        return F.softmax(x.float(), dim=dim)
    return F.softmax(x, dim=dim, dtype=x.dtype)


def scaled_dot_product_attention(queries, keys, values, mask=None):
    head_dim = queries.size(-1)
    scaling = head_dim ** -0.5
    q = queries * scaling
    attn_weights = torch.matmul(q, keys.transpose(-1, -2))
    if mask is not None:
        key_padding_mask = mask
        attn_weights = attn_weights.masked_fill(key_padding_mask, torch.finfo(attn_weights.dtype).min)
    attn_weights_float = softmax(attn_weights, dim=-1)
    if mask is not None:
        attn_weights_float = attn_weights_float.masked_fill(key_padding_mask, 0.0)
    attn_probs = attn_weights_float.type_as(attn_weights)
    attn = torch.matmul(attn_probs, values)
    return attn, attn_probs
