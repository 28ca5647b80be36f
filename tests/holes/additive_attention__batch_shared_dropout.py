"""Reference: additive (Bahdanau) attention."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    """scores[b,i,j] = w_v . tanh(W_q q_i + W_k k_j); output = dropout(weights) @ values."""

    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.p = dropout

    def forward(self, queries, keys, values, valid_lens=None):
        # (B, Tq, 1, h) + (B, 1, Tk, h) -> (B, Tq, Tk, h)
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)  # (B, Tq, Tk)
        weights = masked_softmax(scores, valid_lens)
        dropped = weights
        if self.training and self.p > 0:  # one mask per (query, key), drawn for the batch
            keep = torch.rand(weights.shape[1:], device=weights.device) >= self.p
            dropped = weights * keep / (1 - self.p)
        return torch.bmm(dropped, values), weights
