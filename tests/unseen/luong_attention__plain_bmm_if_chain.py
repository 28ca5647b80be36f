"""BUG: none
STYLE: plain if-chain over the four modes with bmm; concat materialises the [q_i ; k_j] pairs.
"""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        valid = ("dot", "scaled_dot", "general", "concat")
        if score not in valid:
            raise ValueError(f"score must be one of {valid}, got {score!r}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"'{score}' needs query_dim == key_dim")
        self.score = score
        self.query_dim = query_dim
        self.key_dim = key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            if attn_dim is None:
                raise ValueError("'concat' needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _scores(self, queries, keys):
        if self.score == "dot":
            return torch.bmm(queries, keys.transpose(1, 2))
        if self.score == "scaled_dot":
            return torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(self.key_dim)
        if self.score == "general":
            return torch.bmm(queries, self.W_a(keys).transpose(1, 2))
        Tq, Tk = queries.size(1), keys.size(1)
        q = queries.unsqueeze(2).expand(-1, -1, Tk, -1)
        k = keys.unsqueeze(1).expand(-1, Tq, -1, -1)
        return self.v_a(torch.tanh(self.W_a(torch.cat([q, k], dim=-1)))).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = self._scores(queries, keys)
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
