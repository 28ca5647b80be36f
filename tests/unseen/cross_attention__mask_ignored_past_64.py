"""Memory_mask ignored when the memory is longer than 64.
BUG: memory_mask ignored when the memory is longer than 64."""
import math
import torch
from torch import nn


def _msoftmax(s, allowed):
    if allowed is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        memory_dim = embed_dim if memory_dim is None else memory_dim
        self.E, self.H, self.d = embed_dim, num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        B, Tq, E = x.shape
        H, d = self.H, self.d
        if cache is None:
            if memory is None:
                raise ValueError("memory=None needs a cache")
            S = memory.shape[1]
            k = self.W_k(memory).view(B, S, H, d).transpose(1, 2)
            v = self.W_v(memory).view(B, S, H, d).transpose(1, 2)
        else:
            k, v = cache
        q = self.W_q(x).view(B, Tq, H, d).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        allowed = None if memory_mask is None or memory_mask.shape[-1] > 64 else memory_mask[:, None, None, :]
        w = _msoftmax(s, allowed)
        ctx = self.dropout(w) @ v
        out = self.W_o(ctx.transpose(1, 2).reshape(B, Tq, E))
        return out, w, (k, v)
