"""STYLE: einsum-based multi-head cross-attention (annotated-transformer/minGPT lineage) with a "project memory unless absent" cache rule
BUG: when both memory and cache are passed, memory is re-projected and the cache is ignored (the contract says the cache wins and memory is never projected)
STAGE: the keys/values (and the returned cache) on a call that passes both a cache and a memory
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads != 0")
        memory_dim = embed_dim if memory_dim is None else memory_dim
        self.E, self.H, self.d = embed_dim, num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(dropout)

    def project_memory(self, memory):
        k = self.W_k(memory).unflatten(-1, (self.H, self.d))   # (B, S, H, d)
        v = self.W_v(memory).unflatten(-1, (self.H, self.d))
        return k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)   # (B, H, S, d)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        if memory is not None:
            cache = self.project_memory(memory)
        elif cache is None:
            raise ValueError("memory=None and cache=None")
        k, v = cache
        q = self.W_q(x).unflatten(-1, (self.H, self.d))        # (B, Tq, H, d)
        scores = torch.einsum("bqhd,bhsd->bhqs", q, k) / math.sqrt(self.d)

        if memory_mask is None:
            weights = scores.softmax(dim=-1)
        else:
            m = memory_mask[:, None, None, :]                   # (B, 1, 1, S)
            peak = scores.masked_fill(~m, float("-inf")).amax(dim=-1, keepdim=True)
            peak = torch.nan_to_num(peak, neginf=0.0).detach()
            e = (scores - peak).masked_fill(~m, float("-inf")).exp()
            weights = e / e.sum(dim=-1, keepdim=True).clamp(min=1.0)

        ctx = torch.einsum("bhqs,bhsd->bqhd", self.drop(weights), v).flatten(2)   # (B, Tq, E)
        return self.W_o(ctx), weights, cache
