"""BUG: none
STYLE: Hugging Face LLaMA, eager (rotate_half, repeat_kv, tril with the past length), angles in the input's dtype
"""
"""Eager LLaMA attention after Hugging Face transformers (modeling_llama.py), with a tuple cache."""
import math

import torch
from torch import nn


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim, self.base = dim, base

    @torch.no_grad()
    def forward(self, x, position_ids):
        # angles in the activations' dtype (float64 stays float64), float32 for half types
        dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64, device=x.device).to(dt) / self.dim))
        freqs = position_ids.to(dt)[:, :, None] * inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_heads < 1 or embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be a multiple of num_kv_heads >= 1")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for rotary embeddings")
        self.num_heads, self.num_key_value_heads = num_heads, num_kv_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, base=rope_base)

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.size()
        past_len = 0 if cache is None else cache[0].shape[-2]
        hidden_shape = (bsz, q_len, -1, self.head_dim)
        query_states = self.W_q(x).view(hidden_shape).transpose(1, 2)
        key_states = self.W_k(x).view(hidden_shape).transpose(1, 2)
        value_states = self.W_v(x).view(hidden_shape).transpose(1, 2)

        position_ids = torch.arange(past_len, past_len + q_len, device=x.device).unsqueeze(0)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        if cache is not None:
            key_states = torch.cat([cache[0], key_states], dim=-2)
            value_states = torch.cat([cache[1], value_states], dim=-2)
        new_cache = (key_states, value_states)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        kv_len = key_states.shape[-2]
        causal_mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(diagonal=past_len)
        attn_weights = attn_weights.masked_fill(~causal_mask, torch.finfo(attn_weights.dtype).min)
        up = torch.promote_types(query_states.dtype, torch.float32)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=up).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1).contiguous()
        return self.W_o(attn_output), new_cache
