"""When `values is keys` (self-attention), the values are projected with W_k.
BUG: when `values is keys` (self-attention), the values are projected with W_k."""
import math
import torch
from torch import nn


def _msoftmax(s, allowed):
    if allowed is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        self.E, self.H, self.d = embed_dim, num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        B, Tq, E = queries.shape
        Tk = keys.shape[1]
        H, d = self.H, self.d
        q = self.W_q(queries).view(B, Tq, H, d).transpose(1, 2)
        k = self.W_k(keys).view(B, Tk, H, d).transpose(1, 2)
        v = k if (values is keys and keys is not queries) else self.W_v(values).view(B, Tk, H, d).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        w = _msoftmax(s, mask)
        ctx = self.dropout(w) @ v
        return self.W_o(ctx.transpose(1, 2).reshape(B, Tq, E)), w
