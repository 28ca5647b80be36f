"""Causal self-attention with an explicit group axis (no K/V copy) and einsum; RoPE from the sibling module."""
import torch
from torch import nn

from .rope import apply_rope


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        kv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0 or kv < 1 or num_heads % kv != 0 or (embed_dim // num_heads) % 2 != 0:
            raise ValueError(f"bad sizes: embed_dim={embed_dim}, num_heads={num_heads}, num_kv_heads={num_kv_heads}")
        self.h, self.kv, self.d, self.base = num_heads, kv, embed_dim // num_heads, rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, kv * self.d, bias=False)
        self.W_v = nn.Linear(embed_dim, kv * self.d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        b, t, e = x.shape
        p = cache[0].size(-2) if cache is not None else 0
        pos = torch.arange(p, p + t, device=x.device)
        g = self.h // self.kv
        q = apply_rope(self.W_q(x).view(b, t, self.kv, g, self.d).permute(0, 2, 3, 1, 4), pos, self.base)
        k = apply_rope(self.W_k(x).view(b, t, self.kv, self.d).transpose(1, 2), pos, self.base)
        v = self.W_v(x).view(b, t, self.kv, self.d).transpose(1, 2)
        if cache is not None:
            k, v = torch.cat([cache[0], k], -2), torch.cat([cache[1], v], -2)
        s = torch.einsum("bngtd,bnsd->bngts", q, k) * self.d ** -0.5
        i = torch.arange(t, device=x.device)[:, None] + p
        j = torch.arange(p + t, device=x.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
        ctx = torch.einsum("bngts,bnsd->btngd", s.softmax(-1), v).reshape(b, t, e)
        return self.W_o(ctx), (k, v)
