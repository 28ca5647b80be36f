"""Treats any 3-D mask as (B, Tq, Tk), and a 2-D one as (Tq, Tk)."""
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.h, self.d = num_heads, embed_dim // num_heads
        self.W_q, self.W_k = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.W_v, self.W_o = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        B = queries.shape[0]
        split = lambda x: x.view(B, -1, self.h, self.d).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.W_q(queries)), split(self.W_k(keys)), split(self.W_v(values))
        scores = q @ k.transpose(-1, -2) / self.d ** 0.5
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = scores.masked_fill(~mask, float("-inf"))
        w = torch.nan_to_num(torch.softmax(scores, -1))
        out = (self.drop(w) @ v).transpose(1, 2).reshape(B, -1, self.h * self.d)
        return self.W_o(out), w
