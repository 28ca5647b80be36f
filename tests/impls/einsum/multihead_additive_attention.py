"""Correct: einsum with explicit head axes."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.H, self.h = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) * 0.1)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        q = self.W_q(queries).reshape(B, Tq, self.H, self.h)
        k = self.W_k(keys).reshape(B, Tk, self.H, self.h)
        feats = torch.tanh(q[:, :, None] + k[:, None])  # (B, Tq, Tk, H, h)
        scores = torch.einsum("bqknh,nh->bnqk", feats, self.w_v)
        if valid_lens is None:
            lens = None
        elif valid_lens.dim() == 1:
            lens = valid_lens[:, None].expand(B, self.H).reshape(-1)
        else:
            lens = valid_lens[:, None, :].expand(B, self.H, Tq).reshape(B * self.H, Tq)
        weights = masked_softmax(scores.reshape(B * self.H, Tq, Tk), lens).reshape(B, self.H, Tq, Tk)
        ctx = torch.einsum("bnqk,bkv->bqnv", self.dropout(weights), values).reshape(B, Tq, -1)
        return self.W_o(ctx), weights
