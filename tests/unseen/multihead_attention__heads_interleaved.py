"""BUG: heads split in the wrong order: view(B, T, d, H) so head n takes the strided features n::H instead of n*d:(n+1)*d (and merged back the same way). Differs from nn.MultiheadAttention on any input with num_heads > 1 and d > 1.
STAGE: the projections (per-head slices of q, k, v), hence the scores
STYLE: a port from a channels-last codebase (einops-like 'b t (d h) -> b h t d')
"""
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.h, self.d = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.d, self.h).permute(0, 3, 1, 2)     # 'b t (d h) -> b h t d'

    def forward(self, queries, keys, values, mask=None):
        q, k, v = self._heads(self.W_q(queries)), self._heads(self.W_k(keys)), self._heads(self.W_v(values))
        s = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        if mask is not None:
            s = s.masked_fill(~mask, float('-inf'))
            live = mask.any(-1, keepdim=True)
            s = s.masked_fill(~live, 0.0)
            w = s.softmax(-1).masked_fill(~live, 0.0)
        else:
            w = s.softmax(-1)
        ctx = self.dropout(w) @ v                                    # (B, H, Tq, d)
        B, H, Tq, d = ctx.shape
        ctx = ctx.permute(0, 2, 3, 1).reshape(B, Tq, d * H)         # 'b h t d -> b t (d h)'
        return self.W_o(ctx), w
