"""STYLE: "rotate at attention time" decoder (cache the raw projections, apply RoPE to the whole key sequence each step)
BUG: the cache stores the keys before rotation (and the whole key sequence is re-rotated at 0..P+T-1 each call) instead of storing rotated keys.
STAGE: cache
WHEN: always for the returned cache; the output too when given a cache of rotated keys (from a correct implementation)
"""
import math

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        if self.num_kv_heads < 1 or num_heads % self.num_kv_heads != 0:
            raise ValueError("num_heads % num_kv_heads != 0")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 == 1:
            raise ValueError("odd head_dim")
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def _cos_sin(self, positions, dtype):
        dtype = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = 1.0 / self.rope_base ** (torch.arange(0, self.head_dim, 2, device=positions.device, dtype=dtype) / self.head_dim)
        freqs = positions.to(dtype)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def _rotate(self, x, cos, sin):
        xc = x.to(cos.dtype)
        return (xc * cos + rotate_half(xc) * sin).to(x.dtype)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.W_q(x).view(B, T, H, hd).transpose(1, 2)
        k = self.W_k(x).view(B, T, Hkv, hd).transpose(1, 2)
        v = self.W_v(x).view(B, T, Hkv, hd).transpose(1, 2)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        new_cache = (k, v)
        S = k.shape[2]
        P = S - T

        cos, sin = self._cos_sin(torch.arange(S, device=x.device), x.dtype)
        q = self._rotate(q, cos[P:], sin[P:])
        k = self._rotate(k, cos, sin)

        n_rep = H // Hkv
        k = k[:, :, None].expand(B, Hkv, n_rep, S, hd).reshape(B, H, S, hd)
        v = v[:, :, None].expand(B, Hkv, n_rep, S, hd).reshape(B, H, S, hd)
        scores = q @ k.transpose(2, 3) / math.sqrt(hd)
        future = torch.ones(T, S, dtype=torch.bool, device=x.device).triu(P + 1)
        scores = scores.masked_fill(future, float("-inf"))
        attn = scores.softmax(-1)
        out = (attn @ v).transpose(1, 2).reshape(B, T, H * hd)
        return self.W_o(out), new_cache
