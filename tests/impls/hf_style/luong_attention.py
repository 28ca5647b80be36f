"""Luong attention as a tutorial writes it: one method per score, dispatched by a dict."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    METHODS = ("dot", "scaled_dot", "general", "concat")

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in self.METHODS:
            raise ValueError(f"{score} is not an appropriate attention method: choose one of {self.METHODS}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("dot products need query_dim == key_dim")
        if score == "concat" and attn_dim is None:
            raise ValueError("concat needs attn_dim")
        self.method, self.key_dim = score, key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def dot_score(self, q, k):
        return torch.sum(q.unsqueeze(2) * k.unsqueeze(1), dim=-1)

    def scaled_dot_score(self, q, k):
        return self.dot_score(q, k) / self.key_dim ** 0.5

    def general_score(self, q, k):
        return self.dot_score(q, self.W_a(k))

    def concat_score(self, q, k):
        Tq, Tk = q.size(1), k.size(1)
        energy = self.W_a(torch.cat((q.unsqueeze(2).expand(-1, -1, Tk, -1), k.unsqueeze(1).expand(-1, Tq, -1, -1)), 3))
        return self.v_a(energy.tanh()).squeeze(3)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = getattr(self, f"{self.method}_score")(queries, keys)
        weights = masked_softmax(scores, valid_lens)
        return self.dropout(weights).bmm(values), weights
