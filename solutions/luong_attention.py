"""Reference: Luong attention with dot, scaled_dot, general and concat scores."""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax

SCORES = ("dot", "scaled_dot", "general", "concat")


class LuongAttention(nn.Module):
    """scores by `score`; weights = masked_softmax(scores); output = dropout(weights) @ values."""

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"score must be one of {', '.join(SCORES)}; got {score!r}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"{score} needs query_dim == key_dim; got {query_dim} and {key_dim}")
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if score == "concat":
            if attn_dim is None:
                raise ValueError("concat needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.score, self.key_dim = score, key_dim
        self.dropout = nn.Dropout(dropout)

    def scores(self, queries, keys):
        if self.score == "dot":
            return queries @ keys.transpose(1, 2)
        if self.score == "scaled_dot":
            return queries @ keys.transpose(1, 2) / math.sqrt(self.key_dim)
        if self.score == "general":
            return queries @ self.W_a(keys).transpose(1, 2)
        Tq, Tk = queries.shape[1], keys.shape[1]
        pairs = torch.cat(  # (B, Tq, Tk, dq + dk), query first
            [queries.unsqueeze(2).expand(-1, -1, Tk, -1), keys.unsqueeze(1).expand(-1, Tq, -1, -1)], dim=-1
        )
        return self.v_a(torch.tanh(self.W_a(pairs))).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        weights = masked_softmax(self.scores(queries, keys), valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
