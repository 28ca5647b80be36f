"""BUG: values are right, but K/V are materialised per query head with transformers' repeat_kv (expand(...).reshape(...)), a (B, Hq, Tk, d) copy that breaks the memory bound max(S, B*Hq*Tq*Tk, B*Hq*Tq*dv) on decoding-like shapes (Tq=1 < d, Tq < Tk, B*Hkv >= 2).
STAGE: none of the values; the K/V copy (memory) is the first thing that differs
STYLE: Hugging Face transformers LlamaAttention eager path (repeat_kv + eager_attention_forward)
"""
import torch
from torch import nn


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def grouped_query_attention(queries, keys, values, mask=None):
    num_heads, num_kv = queries.shape[1], keys.shape[1]
    if num_heads % num_kv != 0:
        raise ValueError("num_heads must be divisible by num_key_value_heads")
    n_rep = num_heads // num_kv
    key_states = repeat_kv(keys, n_rep)
    value_states = repeat_kv(values, n_rep)
    scaling = queries.shape[-1] ** -0.5
    attn_weights = torch.matmul(queries, key_states.transpose(2, 3)) * scaling
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~mask, torch.finfo(attn_weights.dtype).min)
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    if mask is not None:
        attn_weights = attn_weights * torch.broadcast_to(mask, attn_weights.shape).any(-1, keepdim=True)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output, attn_weights
