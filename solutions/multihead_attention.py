"""Reference: Transformer multi-head attention (batch first)."""
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    """Per head: softmax(q k^T / sqrt(d)) over allowed keys; heads concatenated, then W_o."""

    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        B, Tq, _ = queries.shape
        Tk, H, d = keys.shape[1], self.num_heads, self.head_dim
        q = self.W_q(queries).view(B, Tq, H, d).transpose(1, 2)  # (B, H, Tq, d)
        k = self.W_k(keys).view(B, Tk, H, d).transpose(1, 2)  # (B, H, Tk, d)
        v = self.W_v(values).view(B, Tk, H, d).transpose(1, 2)  # (B, H, Tk, d)
        scores = q @ k.transpose(-2, -1) / d**0.5  # (B, H, Tq, Tk)
        if mask is None:
            weights = torch.softmax(scores, dim=-1)
        else:
            filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            weights = torch.softmax(filled, dim=-1) * mask  # rows with no allowed key: all zeros
        context = self.dropout(weights) @ v  # (B, H, Tq, d)
        return self.W_o(context.transpose(1, 2).reshape(B, Tq, H * d)), weights
