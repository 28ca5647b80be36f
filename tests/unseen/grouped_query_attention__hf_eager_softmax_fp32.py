"""STYLE: Hugging Face eager_attention_forward (softmax(..., dtype=torch.float32).to(query.dtype)), without repeat_kv
BUG: the softmax is always computed in float32 and cast back, so float64 inputs lose precision.
STAGE: weights
WHEN: float64 only (relative error ~1e-7 on ordinary scores, ~5e-4 when scores are ~1e4 in magnitude)
"""
import torch
from torch import nn


def grouped_query_attention(queries, keys, values, mask=None):
    batch, num_heads, q_len, head_dim = queries.shape
    num_key_value_heads, kv_len = keys.shape[1], keys.shape[2]
    if num_heads % num_key_value_heads != 0:
        raise ValueError(
            f"num_heads ({num_heads}) must be divisible by num_key_value_heads ({num_key_value_heads})"
        )
    num_key_value_groups = num_heads // num_key_value_heads
    scaling = head_dim ** -0.5

    query_states = queries.reshape(batch, num_key_value_heads, num_key_value_groups * q_len, head_dim)
    attn_weights = torch.matmul(query_states, keys.transpose(2, 3)) * scaling
    attn_weights = attn_weights.view(batch, num_heads, q_len, kv_len)
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask, torch.finfo(attn_weights.dtype).min)

    # upcast attention to fp32
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(queries.dtype)
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask, 0.0)

    attn_output = torch.matmul(
        attn_weights.view(batch, num_key_value_heads, num_key_value_groups * q_len, kv_len), values
    )
    return attn_output.view(batch, num_heads, q_len, -1), attn_weights
