"""Cross-attention with the heads folded into the batch ((B * H, T, d) and bmm), the cache kept in the contract's
(B, H, S, d) layout, and the mask added as a finite bias then applied again to the weights."""
import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("num_heads must divide embed_dim")
        kv_in = memory_dim or embed_dim
        self.num_heads = num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(kv_in, embed_dim)
        self.W_v = nn.Linear(kv_in, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        B, T, E = x.shape
        H = self.num_heads
        d = E // H
        if cache is None:
            if memory is None:
                raise ValueError("give memory or a cache")
            S = memory.shape[1]
            k = self.W_k(memory).reshape(B, S, H, d).permute(0, 2, 1, 3)
            v = self.W_v(memory).reshape(B, S, H, d).permute(0, 2, 1, 3)
            cache = (k, v)
        k, v = cache
        S = k.shape[2]
        q = self.W_q(x).reshape(B, T, H, d).permute(0, 2, 1, 3).reshape(B * H, T, d)
        scores = torch.bmm(q, k.reshape(B * H, S, d).transpose(1, 2)) / math.sqrt(d)
        if memory_mask is not None:
            keep = memory_mask.repeat_interleave(H, dim=0)[:, None, :]  # (B * H, 1, S), row b * H + n
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        if memory_mask is not None:
            probs = probs * keep
        ctx = torch.bmm(self.attn_drop(probs), v.reshape(B * H, S, d))
        out = ctx.reshape(B, H, T, d).transpose(1, 2).reshape(B, T, E)
        return self.W_o(out), probs.reshape(B, H, T, S), cache
