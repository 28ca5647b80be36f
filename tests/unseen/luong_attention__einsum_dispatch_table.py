"""BUG: none
STYLE: einsum everywhere (general as one three-operand einsum) and a dict dispatch to the scoring methods; the scaled_dot scale is applied to the queries before the product.
"""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    SCORES = ("dot", "scaled_dot", "general", "concat")

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if not isinstance(score, str) or score not in self.SCORES:
            raise ValueError(f"unknown score {score!r}; valid choices are {list(self.SCORES)}")
        if score in ("dot", "scaled_dot"):
            if query_dim != key_dim:
                raise ValueError(f"{score} scoring needs equal query and key sizes, got {query_dim} vs {key_dim}")
        elif score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        else:
            if attn_dim is None:
                raise ValueError("concat scoring needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.score = score
        self.key_dim = key_dim
        self.dropout = nn.Dropout(dropout)

    def _dot(self, q, k):
        return torch.einsum("bid,bjd->bij", q, k)

    def _scaled_dot(self, q, k):
        return torch.einsum("bid,bjd->bij", q / math.sqrt(self.key_dim), k)

    def _general(self, q, k):
        return torch.einsum("bid,de,bje->bij", q, self.W_a.weight, k)

    def _concat(self, q, k):
        Tq, Tk = q.shape[1], k.shape[1]
        pairs = torch.cat([q[:, :, None, :].expand(-1, -1, Tk, -1),
                           k[:, None, :, :].expand(-1, Tq, -1, -1)], dim=-1)
        hidden = torch.tanh(torch.einsum("bijc,hc->bijh", pairs, self.W_a.weight))
        return torch.einsum("bijh,h->bij", hidden, self.v_a.weight[0])

    def forward(self, queries, keys, values, valid_lens=None):
        score_fn = {
            "dot": self._dot,
            "scaled_dot": self._scaled_dot,
            "general": self._general,
            "concat": self._concat,
        }[self.score]
        scores = score_fn(queries, keys)
        weights = masked_softmax(scores, valid_lens)
        output = torch.einsum("bij,bjd->bid", self.dropout(weights), values)
        return output, weights
