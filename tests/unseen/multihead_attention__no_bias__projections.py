"""All four projections without a bias (the catalogue drops only W_o's)."""
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads, self.d_k = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        B = queries.size(0)
        q, k, v = [lin(x).view(B, -1, self.num_heads, self.d_k).transpose(1, 2)
                   for lin, x in zip((self.W_q, self.W_k, self.W_v), (queries, keys, values))]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        attn = torch.softmax(scores, dim=-1)
        if mask is not None:
            attn = attn * mask
        x = (self.dropout(attn) @ v).transpose(1, 2).contiguous().view(B, -1, self.num_heads * self.d_k)
        return self.W_o(x), attn
