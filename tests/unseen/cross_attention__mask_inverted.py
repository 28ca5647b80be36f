"""BUG: memory_mask used with key_padding_mask's meaning (True = padding), i.e. the allowed positions are masked out nn.Dropout on the probabilities, past_key_value reuse)
STAGE: the catalogue's mask_inverted
"""
import math
import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        memory_dim = embed_dim if memory_dim is None else memory_dim
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def _shape(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        if cache is None:
            if memory is None:
                raise ValueError("either memory or cache must be given")
            k = self._shape(self.W_k(memory))
            v = self._shape(self.W_v(memory))
        else:
            k, v = cache
        B, Tq, _ = x.shape
        q = self._shape(self.W_q(x)) * self.scaling
        attn = torch.matmul(q, k.transpose(-1, -2))                  # (B, H, Tq, S)
        if memory_mask is not None:
            m = ~memory_mask[:, None, None, :]
            attn = attn.masked_fill(~m, torch.finfo(attn.dtype).min)
            probs = torch.softmax(attn, dim=-1) * m
        else:
            probs = torch.softmax(attn, dim=-1)
        ctx = torch.matmul(self.dropout(probs), v)                    # (B, H, Tq, d)
        ctx = ctx.transpose(1, 2).reshape(B, Tq, self.embed_dim)
        return self.W_o(ctx), probs, (k, v)
