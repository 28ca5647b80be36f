"""Heads concatenated with .contiguous().view(...) straight from (B, H, Tq, d): no transpose."""
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads != 0")
        self.h, self.d = num_heads, embed_dim // num_heads
        self.W_q, self.W_k = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.W_v, self.W_o = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        B, Tq, E = queries.shape
        q = self.W_q(queries).view(B, Tq, self.h, self.d).permute(0, 2, 1, 3)
        k = self.W_k(keys).view(B, -1, self.h, self.d).permute(0, 2, 1, 3)
        v = self.W_v(values).view(B, -1, self.h, self.d).permute(0, 2, 1, 3)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e30)
        w = torch.softmax(scores, dim=-1)
        if mask is not None:
            w = w.masked_fill(~mask, 0.0)
        ctx = torch.einsum("bhqk,bhkd->bhqd", self.dropout(w), v)
        return self.W_o(ctx.contiguous().view(B, Tq, E)), w
