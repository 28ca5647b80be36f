"""Heads folded into the batch (B*H) and torch.bmm, as older PyTorch code does."""
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.H = num_heads
        self.W_q, self.W_k = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.W_v, self.W_o = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def _fold(self, x):
        B, T, E = x.shape
        return x.reshape(B, T, self.H, E // self.H).permute(0, 2, 1, 3).reshape(B * self.H, T, E // self.H)

    def forward(self, queries, keys, values, mask=None):
        B, Tq, E = queries.shape
        Tk, H, d = keys.shape[1], self.H, E // self.H
        q, k, v = self._fold(self.W_q(queries)), self._fold(self.W_k(keys)), self._fold(self.W_v(values))
        scores = torch.bmm(q, k.transpose(1, 2)) / d ** 0.5  # (B*H, Tq, Tk)
        if mask is not None:
            m = mask.expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
            scores = scores.masked_fill(~m, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights * m
        ctx = torch.bmm(self.dropout(weights), v).reshape(B, H, Tq, d).permute(0, 2, 1, 3).reshape(B, Tq, E)
        return self.W_o(ctx), weights.reshape(B, H, Tq, Tk)
