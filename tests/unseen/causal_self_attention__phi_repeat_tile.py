"""STYLE: Phi / GPT-NeoX-style decoder attention with a partial-rotary-free rotary class, past_key_value tuple, and a tiling repeat_kv
BUG: repeat_kv tiles the key/value heads with .repeat(1, n_rep, 1, 1), so query head n reads key/value head n % Hkv instead of n // (H // Hkv).
STAGE: scores
WHEN: 1 < num_kv_heads < num_heads (MHA and MQA are right).
"""
import math

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, x, position_ids):
        work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = self.base ** (-torch.arange(0, self.dim, 2, device=x.device, dtype=work) / self.dim)
        freqs = position_ids.to(work)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    work = cos.dtype
    q_embed = (q.to(work) * cos) + (rotate_half(q.to(work)) * sin)
    k_embed = (k.to(work) * cos) + (rotate_half(k.to(work)) * sin)
    return q_embed.to(q.dtype), k_embed.to(k.dtype)


def repeat_kv(hidden_states, n_rep):
    if n_rep == 1:
        return hidden_states
    return hidden_states.repeat(1, n_rep, 1, 1)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.hidden_size = embed_dim
        self.num_heads = num_heads
        self.num_key_value_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError(f"hidden_size {embed_dim} not divisible by num_heads {num_heads}")
        if self.num_key_value_heads < 1 or num_heads % self.num_key_value_heads != 0:
            raise ValueError(f"num_heads {num_heads} not a multiple of num_key_value_heads {num_kv_heads}")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim {self.head_dim} must be even")
        self.num_key_value_groups = num_heads // self.num_key_value_heads
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.num_key_value_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.num_key_value_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim, base=rope_base)

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.size()
        past_len = 0 if cache is None else cache[0].shape[-2]
        query_states = self.W_q(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.W_k(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = self.W_v(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        position_ids = torch.arange(past_len, past_len + q_len, device=x.device)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if cache is not None:
            key_states = torch.cat([cache[0], key_states], dim=2)
            value_states = torch.cat([cache[1], value_states], dim=2)
        past_key_value = (key_states, value_states)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        kv_len = key_states.shape[-2]
        causal_mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(kv_len - q_len)
        attn_weights = attn_weights.masked_fill(~causal_mask, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, self.hidden_size)
        return self.W_o(attn_output), past_key_value
