"""BUG: reshapes the projections straight to (B, nh, T, hs) with view, which mixes positions and features instead of splitting the feature axis.
STAGE: the head split
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class MultiHeadAttention(nn.Module):

    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"n_embd={embed_dim} is not divisible by n_head={num_heads}")
        # key, query, value projections
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=True)
        self.W_k = nn.Linear(embed_dim, embed_dim, bias=True)
        self.W_v = nn.Linear(embed_dim, embed_dim, bias=True)
        # output projection
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=True)
        # regularization
        self.attn_dropout = nn.Dropout(dropout)
        self.n_head = num_heads
        self.n_embd = embed_dim
        self.dropout = dropout

    def forward(self, queries, keys, values, mask=None):
        B, T, C = queries.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        S = keys.size(1)

        q = self.W_q(queries).view(B, self.n_head, T, C // self.n_head)  # (B, nh, T, hs)
        k = self.W_k(keys).view(B, self.n_head, S, C // self.n_head)  # (B, nh, S, hs)
        v = self.W_v(values).view(B, self.n_head, S, C // self.n_head)  # (B, nh, S, hs)

        # manual implementation of attention
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if mask is not None:
            att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = torch.nan_to_num(att, nan=0.0)  # rows that see nothing
        y = self.attn_dropout(att) @ v  # (B, nh, T, S) x (B, nh, S, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.W_o(y)
        return y, att
