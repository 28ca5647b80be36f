"""BUG: the parameters of every scoring mode are created up front "so the mode can be switched later", instead of only the chosen mode's parameters.
STAGE: the constructor
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
        if score == "concat" and attn_dim is None:
            raise ValueError("'concat' needs attn_dim")
        self.score = score
        self.key_dim = key_dim
        # keep every scorer around so the mode can be switched later
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        hidden = attn_dim if attn_dim is not None else query_dim
        self.W_concat = nn.Linear(query_dim + key_dim, hidden, bias=False)
        self.v_a = nn.Linear(hidden, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.score == "dot":
            scores = queries @ keys.transpose(-1, -2)
        elif self.score == "scaled_dot":
            scores = queries @ keys.transpose(-1, -2) / math.sqrt(self.key_dim)
        elif self.score == "general":
            scores = queries @ self.W_a(keys).transpose(-1, -2)
        else:
            Tq, Tk = queries.size(1), keys.size(1)
            pairs = torch.cat([queries.unsqueeze(2).expand(-1, -1, Tk, -1),
                               keys.unsqueeze(1).expand(-1, Tq, -1, -1)], dim=-1)
            scores = self.v_a(torch.tanh(self.W_concat(pairs))).squeeze(-1)
        weights = masked_softmax(scores, valid_lens)
        return self.dropout(weights) @ values, weights
