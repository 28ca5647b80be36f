"""BUG: prefers memory over the cache: when memory is given it is re-projected even if a cache is passed (and that new (k, v) is returned). Differs when a cache from another memory (or stale weights) is passed together with a memory.
STAGE: the projections (k, v)
STYLE: a generic "if memory is not None: project" decoder layer (many tutorial Transformer decoders)
"""
import math
import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads != 0")
        memory_dim = embed_dim if memory_dim is None else memory_dim
        self.H, self.d = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(dropout)

    def split(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.H, self.d).transpose(1, 2)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        if memory is not None:
            k, v = self.split(self.W_k(memory)), self.split(self.W_v(memory))
        elif cache is not None:
            k, v = cache
        else:
            raise ValueError("memory and cache cannot both be None")
        q = self.split(self.W_q(x))
        s = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        if memory_mask is not None:
            m = memory_mask[:, None, None, :]
            live = m.any(-1, keepdim=True)
            s = s.masked_fill(~m, float("-inf")).masked_fill(~live, 0.0)
            w = s.softmax(-1).masked_fill(~live, 0.0)
        else:
            w = s.softmax(-1)
        ctx = (self.drop(w) @ v).transpose(1, 2)
        B, Tq = x.shape[:2]
        return self.W_o(ctx.reshape(B, Tq, self.H * self.d)), w, (k, v)
