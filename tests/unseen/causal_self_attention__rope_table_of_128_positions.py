"""Positions clamped at 127 (a max_position_embeddings table): wrong past 128 tokens.
BUG: positions clamped at 127 (a max_position_embeddings table): wrong past 128 tokens."""
import math
import torch
from torch import nn

from .rope import apply_rope


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        if num_kv_heads < 1:
            raise ValueError("num_kv_heads < 1")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads % num_kv_heads != 0")
        d = embed_dim // num_heads
        if d % 2 != 0:
            raise ValueError("odd head size")
        self.E, self.H, self.Hkv, self.d = embed_dim, num_heads, num_kv_heads, d
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * d, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        H, Hkv, d = self.H, self.Hkv, self.d
        q = self.W_q(x).view(B, T, H, d).transpose(1, 2)
        k = self.W_k(x).view(B, T, Hkv, d).transpose(1, 2)
        v = self.W_v(x).view(B, T, Hkv, d).transpose(1, 2)
        P = 0 if cache is None else cache[0].shape[2]
        pos = torch.arange(P, P + T, device=x.device).clamp(max=127)  # max_position_embeddings = 128
        q = apply_rope(q, pos, base=self.rope_base, interleaved=False)
        k = apply_rope(k, pos, base=self.rope_base, interleaved=False)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        S = k.shape[2]
        G = H // Hkv
        qg = q.reshape(B, Hkv, G, T, d)
        s = torch.einsum("bhgtd,bhsd->bhgts", qg, k) / math.sqrt(d)
        allowed = torch.arange(S, device=x.device)[None, :] <= (torch.arange(T, device=x.device) + P)[:, None]
        s = s.masked_fill(~allowed, float("-inf"))
        w = torch.softmax(s, dim=-1)
        o = torch.einsum("bhgts,bhsd->bhgtd", w, v).reshape(B, H, T, d)
        o = o.transpose(1, 2).reshape(B, T, E)
        return self.W_o(o), (k, v)
