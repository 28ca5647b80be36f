"""Each projection an nn.Linear subclass that splits heads itself; F.linear for the output."""
import torch
import torch.nn.functional as F
from torch import nn


class HeadProjection(nn.Linear):
    def __init__(self, embed_dim, num_heads):
        super().__init__(embed_dim, embed_dim)
        self.num_heads = num_heads

    def heads(self, x):
        B, T, E = x.shape
        return self(x).reshape(B, T, self.num_heads, E // self.num_heads).transpose(1, 2)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} is not a multiple of num_heads={num_heads}")
        self.W_q, self.W_k, self.W_v = (HeadProjection(embed_dim, num_heads) for _ in range(3))
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.p = dropout

    def forward(self, queries, keys, values, mask=None):
        q, k, v = self.W_q.heads(queries), self.W_k.heads(keys), self.W_v.heads(values)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = weights * mask
        ctx = F.dropout(weights, self.p, training=self.training) @ v
        B, H, Tq, d = ctx.shape
        return F.linear(ctx.transpose(1, 2).reshape(B, Tq, H * d), self.W_o.weight, self.W_o.bias), weights
