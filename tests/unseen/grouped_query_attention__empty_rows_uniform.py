"""BUG: HF-style additive finfo.min mask without zeroing fully masked rows afterwards, so a row with no allowed key gets uniform weights instead of zeros.
STAGE: the mask
"""
import torch
from torch import nn


def grouped_query_attention(queries, keys, values, mask=None):
    bsz, num_heads, q_len, head_dim = queries.shape
    num_key_value_heads, kv_len = keys.shape[1], keys.shape[2]
    if num_heads % num_key_value_heads != 0:
        raise ValueError(
            f"num_heads ({num_heads}) must be divisible by num_key_value_heads ({num_key_value_heads})"
        )
    num_key_value_groups = num_heads // num_key_value_heads
    scaling = head_dim**-0.5

    compute_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype

    query_states = queries.reshape(bsz, num_key_value_heads, num_key_value_groups * q_len, head_dim)
    attn_weights = torch.matmul(query_states.to(compute_dtype), keys.to(compute_dtype).transpose(2, 3)) * scaling
    attn_weights = attn_weights.view(bsz, num_heads, q_len, kv_len)

    if mask is not None:
        min_value = torch.finfo(compute_dtype).min
        causal_mask = torch.zeros(mask.shape, dtype=compute_dtype, device=queries.device).masked_fill(~mask, min_value)
        attn_weights = attn_weights + causal_mask

    # upcast attention to fp32 (only matters for fp16/bf16 inputs)
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=compute_dtype)

    attn_output = torch.matmul(
        attn_weights.reshape(bsz, num_key_value_heads, num_key_value_groups * q_len, kv_len),
        values.to(compute_dtype),
    )
    attn_output = attn_output.reshape(bsz, num_heads, q_len, values.shape[-1])
    return attn_output.to(queries.dtype), attn_weights.to(queries.dtype)
