"""BUG: none
STYLE: a NamedTuple cache, einsum
"""
import math
from typing import NamedTuple, Optional

import torch
import torch.nn as nn


class MemoryKV(NamedTuple):
    k: torch.Tensor   # (B, H, S, d)
    v: torch.Tensor


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"{embed_dim=} is not a multiple of {num_heads=}")
        m = embed_dim if memory_dim is None else memory_dim
        self.H, self.d = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(m, embed_dim)
        self.W_v = nn.Linear(m, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(dropout)

    def project_memory(self, memory) -> MemoryKV:
        B, S, _ = memory.shape
        split = lambda t: t.unflatten(-1, (self.H, self.d)).transpose(1, 2)
        return MemoryKV(split(self.W_k(memory)), split(self.W_v(memory)))

    def forward(self, x, memory=None, memory_mask: Optional[torch.Tensor] = None, cache=None):
        if cache is None:
            if memory is None:
                raise ValueError("memory=None and cache=None")
            cache = self.project_memory(memory)
        k, v = cache
        q = self.W_q(x).unflatten(-1, (self.H, self.d))                  # (B, Tq, H, d)
        s = torch.einsum("bqhd,bhsd->bhqs", q, k) / math.sqrt(self.d)
        if memory_mask is not None:
            allow = memory_mask[:, None, None, :]
            s = s.masked_fill(~allow, -math.inf)
            mx = s.amax(-1, keepdim=True)
            mx = torch.where(mx.isneginf(), torch.zeros_like(mx), mx).detach()
            e = torch.exp(s - mx)
            w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
        else:
            w = torch.softmax(s, -1)
        ctx = torch.einsum("bhqs,bhsd->bqhd", self.drop(w), v)
        return self.W_o(ctx.flatten(2)), w, tuple(cache)
