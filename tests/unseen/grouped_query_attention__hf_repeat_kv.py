"""BUG: Hugging Face's repeat_kv: right values, K/V repeated per query head past the memory bound
STYLE: Hugging Face repeat_kv
"""
import math

import torch
from torch import nn


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """
    This is the equivalent of torch.repeat_interleave(x, dim=1, repeats=n_rep). The hidden states go from (batch,
    num_key_value_heads, seqlen, head_dim) to (batch, num_attention_heads, seqlen, head_dim)
    """
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def grouped_query_attention(queries, keys, values, mask=None):
    num_heads, num_kv = queries.shape[1], keys.shape[1]
    if num_heads % num_kv:
        raise ValueError("num_heads must be divisible by num_key_value_heads")
    key_states = repeat_kv(keys, num_heads // num_kv)
    value_states = repeat_kv(values, num_heads // num_kv)
    attn_weights = torch.matmul(queries, key_states.transpose(2, 3)) / math.sqrt(queries.shape[-1])
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask, torch.finfo(attn_weights.dtype).min)
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask, 0.0)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output, attn_weights
