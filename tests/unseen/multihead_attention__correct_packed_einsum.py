"""STYLE: packed in-projection like nn.MultiheadAttention's in_proj (weights concatenated, one F.linear for self-attention), einsum heads
BUG: none
STAGE: none
WHEN: never
"""
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} must be a multiple of num_heads={num_heads}")
        self.E, self.H, self.D = embed_dim, num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.p = dropout

    def _in_proj(self, queries, keys, values):
        if queries is keys and keys is values:
            w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight], dim=0)
            b = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias], dim=0)
            return F.linear(queries, w, b).chunk(3, dim=-1)
        return self.W_q(queries), self.W_k(keys), self.W_v(values)

    def forward(self, queries, keys, values, mask=None):
        q, k, v = self._in_proj(queries, keys, values)
        q = q.unflatten(-1, (self.H, self.D))  # (B, Tq, H, D)
        k = k.unflatten(-1, (self.H, self.D))
        v = v.unflatten(-1, (self.H, self.D))

        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.D ** -0.5
        if mask is not None:
            logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        weights = torch.softmax(logits, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)

        attn = F.dropout(weights, p=self.p, training=self.training)
        ctx = torch.einsum("bhqk,bkhd->bqhd", attn, v).flatten(2)  # heads in order along the features
        return self.W_o(ctx), weights
