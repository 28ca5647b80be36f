"""Correct, looping over queries and keys."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        q, k = self.W_q(queries), self.W_k(keys)
        scores = torch.stack([
            torch.stack([self.w_v(torch.tanh(q[:, i] + k[:, j])).squeeze(-1) for j in range(k.shape[1])], dim=-1)
            for i in range(q.shape[1])
        ], dim=1)
        weights = masked_softmax(scores, valid_lens)
        return self.drop(weights) @ values, weights
