"""Heads folded into the batch; the scorer as a batched matmul with w_v."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.H, self.h = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) / attn_dim ** 0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, H, h = keys.shape[1], self.H, self.h
        q = self.W_q(queries).reshape(B, Tq, H, h).permute(0, 2, 1, 3).reshape(B * H, Tq, 1, h)
        k = self.W_k(keys).reshape(B, Tk, H, h).permute(0, 2, 1, 3).reshape(B * H, 1, Tk, h)
        w = self.w_v.repeat(B, 1).reshape(B * H, 1, h, 1)
        scores = (torch.tanh(q + k) @ w).squeeze(-1)  # (B*H, Tq, Tk)
        lens = None
        if valid_lens is not None:
            lens = valid_lens.repeat_interleave(H, dim=0)
        weights = masked_softmax(scores, lens)
        v = values.repeat_interleave(H, dim=0)
        ctx = torch.bmm(self.dropout(weights), v).reshape(B, H, Tq, -1).permute(0, 2, 1, 3).reshape(B, Tq, -1)
        return self.W_o(ctx), weights.reshape(B, H, Tq, Tk)
