"""STYLE: Lit-GPT / GPT-NeoX style decoder attention with a cos/sin cache and K/V expanded per query head
BUG: K/V heads are expanded with .repeat(1, G, 1, 1) (tiling) instead of repeat_interleave, so query head n reads kv head n % Hkv instead of n // G.
STAGE: scores
WHEN: 1 < num_kv_heads < num_heads (GQA proper); MHA and MQA are right
"""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads != 0:
            raise ValueError(f"n_embd={embed_dim} is not divisible by n_head={num_heads}")
        if num_kv_heads < 1:
            raise ValueError(f"n_query_groups must be >= 1, got {num_kv_heads}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"n_head={num_heads} is not divisible by n_query_groups={num_kv_heads}")
        self.n_head, self.n_query_groups = num_heads, num_kv_heads
        self.head_size = embed_dim // num_heads
        if self.head_size % 2 != 0:
            raise ValueError(f"head_size={self.head_size} must be even")
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_size, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_size, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def build_rope_cache(self, seq_positions, dtype, device):
        n_elem = self.head_size
        theta = 1.0 / (self.rope_base ** (torch.arange(0, n_elem, 2, device=device, dtype=dtype) / n_elem))
        idx_theta = torch.outer(seq_positions.to(dtype), theta).repeat(1, 2)
        return torch.cos(idx_theta), torch.sin(idx_theta)

    @staticmethod
    def apply_rope(x, cos, sin):
        head_size = x.size(-1)
        x1 = x[..., : head_size // 2]
        x2 = x[..., head_size // 2 :]
        rotated = torch.cat((-x2, x1), dim=-1)
        roped = (x * cos) + (rotated * sin)
        return roped

    def forward(self, x, cache=None):
        B, T, C = x.size()
        input_pos_start = 0 if cache is None else cache[0].size(2)
        work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        cos, sin = self.build_rope_cache(
            torch.arange(input_pos_start, input_pos_start + T, device=x.device), work, x.device
        )

        q = self.W_q(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_query_groups, self.head_size).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_query_groups, self.head_size).transpose(1, 2)
        q = self.apply_rope(q.to(work), cos, sin).to(x.dtype)
        k = self.apply_rope(k.to(work), cos, sin).to(x.dtype)

        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        kv_cache = (k, v)

        q_per_kv = self.n_head // self.n_query_groups
        if q_per_kv > 1:
            k = k.repeat(1, q_per_kv, 1, 1)
            v = v.repeat(1, q_per_kv, 1, 1)

        S = k.size(2)
        scale = 1.0 / math.sqrt(self.head_size)
        att = (q @ k.transpose(-2, -1)) * scale
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=input_pos_start)
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min)
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.W_o(y), kv_cache
