"""Concat, Tk > 32: efficient split path puts tanh on each half (tanh(a)+tanh(b) instead of tanh(a+b)).
BUG: concat, Tk > 32: efficient split path puts tanh on each half (tanh(a)+tanh(b) instead of tanh(a+b))."""
"""Reference: Luong attention with dot, scaled_dot, general and concat scores."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    """scores by `score`; weights = masked_softmax(scores); output = dropout(weights) @ values."""

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        modes = ("dot", "scaled_dot", "general", "concat")
        if score not in modes:
            raise ValueError(f"score must be one of {', '.join(modes)}; got {score!r}")
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

    def forward(self, queries, keys, values, valid_lens=None):
        if self.score in ("dot", "scaled_dot"):
            scores = queries @ keys.transpose(1, 2)  # (B, Tq, Tk)
            if self.score == "scaled_dot":
                scores = scores / self.key_dim**0.5
        elif self.score == "general":
            scores = queries @ self.W_a(keys).transpose(1, 2)
        elif keys.shape[1] > 32:  # long sources: split W_a instead of building the pairs
            dq = queries.shape[-1]
            Wq_, Wk_ = self.W_a.weight[:, :dq], self.W_a.weight[:, dq:]
            scores = self.v_a((queries @ Wq_.T).unsqueeze(2).tanh() + (keys @ Wk_.T).unsqueeze(1).tanh()).squeeze(-1)
        else:
            Tq, Tk = queries.shape[1], keys.shape[1]
            pairs = torch.cat(  # (B, Tq, Tk, dq + dk), query first
                [queries.unsqueeze(2).expand(-1, -1, Tk, -1), keys.unsqueeze(1).expand(-1, Tq, -1, -1)], dim=-1
            )
            scores = self.v_a(torch.tanh(self.W_a(pairs))).squeeze(-1)
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
