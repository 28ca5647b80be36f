"""BUG: repeat_kv expands the group axis before the kv-head axis, tiling the heads (query head n reads kv head n % Hkv) instead of repeating each (n // G); right only when Hkv is 1 or H.
STAGE: the key/value heads
"""
import math

import torch
from torch import nn


class _LlamaRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base):
        super().__init__()
        self.head_dim = head_dim
        self.base = base

    def forward(self, x, position_ids):
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = 1.0 / (
            self.base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64, device=x.device) / self.head_dim)
        )
        freqs = position_ids.to(dtype)[..., None] * inv_freq.to(dtype)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos[None, None]
    sin = sin[None, None]
    qf, kf = q.to(cos.dtype), k.to(cos.dtype)
    q_embed = (qf * cos) + (_rotate_half(qf) * sin)
    k_embed = (kf * cos) + (_rotate_half(kf) * sin)
    return q_embed.to(q.dtype), k_embed.to(k.dtype)


def _repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, None, :, :, :].expand(batch, n_rep, num_key_value_heads, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if num_kv_heads < 1:
            raise ValueError("num_kv_heads must be positive")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2:
            raise ValueError("RoPE needs an even head_dim")
        self.hidden_size = embed_dim
        self.num_heads = num_heads
        self.num_key_value_heads = num_kv_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)
        self.rotary_emb = _LlamaRotaryEmbedding(self.head_dim, float(rope_base))

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.size()
        query_states = self.W_q(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.W_k(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = self.W_v(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        past_len = 0 if cache is None else cache[0].shape[-2]
        position_ids = torch.arange(past_len, past_len + q_len, device=x.device)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = _apply_rotary_pos_emb(query_states, key_states, cos, sin)

        if cache is not None:
            key_states = torch.cat([cache[0], key_states], dim=-2)
            value_states = torch.cat([cache[1], value_states], dim=-2)
        present = (key_states, value_states)
        kv_len = key_states.shape[-2]

        k_rep = _repeat_kv(key_states, self.num_key_value_groups)
        v_rep = _repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, k_rep.transpose(2, 3)) / math.sqrt(self.head_dim)

        q_pos = position_ids[:, None]
        k_pos = torch.arange(kv_len, device=x.device)[None, :]
        causal_mask = k_pos <= q_pos
        attn_weights = attn_weights.masked_fill(~causal_mask, float("-inf"))
        upcast = attn_weights.dtype in (torch.float16, torch.bfloat16)
        attn_weights = nn.functional.softmax(attn_weights.float() if upcast else attn_weights, dim=-1)
        attn_weights = attn_weights.to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, v_rep)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, self.hidden_size)
        return self.W_o(attn_output), present
