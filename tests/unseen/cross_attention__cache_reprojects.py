"""BUG: when memory is passed along with a cache, memory is projected again and the cache ignored fully-masked rows, functional dropout)
STAGE: the catalogue's cache_reprojected
"""
import math
import torch
import torch.nn.functional as F
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be a multiple of num_heads")
        if memory_dim is None:
            memory_dim = embed_dim
        self.E, self.H, self.d = embed_dim, num_heads, embed_dim // num_heads
        self.p = dropout
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        B, Tq, _ = x.shape
        H, d = self.H, self.d
        if memory is None and cache is not None:
            k, v = cache
        elif memory is not None:
            S = memory.shape[1]
            k = self.W_k(memory).reshape(B, S, H, d).permute(0, 2, 1, 3)
            v = self.W_v(memory).reshape(B, S, H, d).permute(0, 2, 1, 3)
        else:
            raise ValueError("CrossAttention needs memory or a cache")
        q = self.W_q(x).reshape(B, Tq, H, d)
        scores = torch.einsum("bqhd,bhsd->bhqs", q, k) / math.sqrt(d)
        if memory_mask is None:
            w = torch.softmax(scores, dim=-1)
        else:
            allow = memory_mask[:, None, None, :].expand_as(scores)
            any_ok = allow.any(-1, keepdim=True)
            s = torch.where(allow | ~any_ok, scores, torch.full_like(scores, float("-inf")))
            w = torch.where(allow, torch.softmax(s, dim=-1), torch.zeros_like(scores))
        wd = F.dropout(w, p=self.p, training=self.training)
        ctx = torch.einsum("bhqs,bhsd->bqhd", wd, v).reshape(B, Tq, self.E)
        return self.W_o(ctx), w, (k, v)
