"""STYLE: nanoGPT CausalSelfAttention extended with RoPE, GQA and a (k, v) cache
BUG: the new tokens are always rotated at positions 0..T-1, ignoring the P cached tokens before them.
STAGE: rope positions
WHEN: decoding with a cache (P > 0)
"""
import math

import torch
import torch.nn as nn


def _rope(x, pos, base):
    d = x.size(-1)
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=dt) / d))
    ang = pos.to(dt)[:, None] * inv_freq[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x.to(dt).chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be a positive multiple of num_kv_heads")
        self.n_head = num_heads
        self.n_kv_head = num_kv_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even for rotary embeddings")
        self.n_embd = embed_dim
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, C = x.size()
        q = self.W_q(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)

        pos = torch.arange(T, device=x.device)
        q = _rope(q, pos, self.rope_base)
        k = _rope(k, pos, self.rope_base)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        S = k.size(2)
        present = (k, v)

        rep = self.n_head // self.n_kv_head
        kk = k.repeat_interleave(rep, dim=1)
        vv = v.repeat_interleave(rep, dim=1)
        att = (q @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        causal = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        att = att.masked_fill(~causal, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = att @ vv
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(y), present
