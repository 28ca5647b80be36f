import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("num_heads must divide embed_dim")
        self.h = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(embed_dim, embed_dim) for _ in range(4))
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        split = lambda x: x.unflatten(-1, (self.h, -1))  # (B, T, H, d)  # noqa: E731
        q, k, v = split(self.W_q(queries)), split(self.W_k(keys)), split(self.W_v(values))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        context = torch.einsum("bhqk,bkhd->bqhd", self.drop(weights), v).flatten(-2)
        return self.W_o(context), weights
