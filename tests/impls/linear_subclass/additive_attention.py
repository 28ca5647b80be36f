"""Projections are subclasses of nn.Linear; the scorer adds a helper method."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class Projection(nn.Linear):
    def __init__(self, n_in, n_out):
        super().__init__(n_in, n_out, bias=False)

    def broadcast(self, x, axis):
        return self(x).unsqueeze(axis)


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q, self.W_k, self.w_v = Projection(query_dim, attn_dim), Projection(key_dim, attn_dim), Projection(attn_dim, 1)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = self.w_v(torch.tanh(self.W_q.broadcast(queries, 2) + self.W_k.broadcast(keys, 1))).squeeze(-1)
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.drop(weights), values), weights
