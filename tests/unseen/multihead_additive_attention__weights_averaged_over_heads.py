"""BUG: like nn.MultiheadAttention's default, the returned weights are averaged over heads, (B, Tq, Tk), instead of per head (B, H, Tq, Tk).
STAGE: the weighted sum
"""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim).normal_(0.0, 1.0 / math.sqrt(attn_dim)))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x):
        # (B, T, H * h) -> (B, H, T, h)
        B, T, _ = x.shape
        return x.unflatten(-1, (self.num_heads, self.attn_dim)).permute(0, 2, 1, 3)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, Tk, H = queries.size(0), queries.size(1), keys.size(1), self.num_heads
        q = self._split(self.W_q(queries)).unsqueeze(3)               # (B, H, Tq, 1, h)
        k = self._split(self.W_k(keys)).unsqueeze(2)                  # (B, H, 1, Tk, h)
        v_a = self.w_v[None, :, None, :, None]                         # (1, H, 1, h, 1)
        scores = (torch.tanh(q + k) @ v_a).squeeze(-1)                 # (B, H, Tq, Tk)

        if valid_lens is not None:
            if valid_lens.dim() == 1:
                valid_lens = valid_lens[:, None].expand(B, Tq)
            # the same lengths for every head: (B, Tq) -> (B, H, Tq) -> (B * H, Tq)
            valid_lens = valid_lens[:, None, :].expand(B, H, Tq).reshape(B * H, Tq)
        weights = masked_softmax(scores.reshape(B * H, Tq, Tk), valid_lens).view(B, H, Tq, Tk)

        context = self.dropout(weights) @ values[:, None]               # (B, H, Tq, dv)
        context = context.transpose(1, 2).flatten(2)                   # (B, Tq, H * dv)
        return self.W_o(context), weights.mean(dim=1)
