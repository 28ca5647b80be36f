"""STYLE: einsum-based Luong attention with a dict of score functions (interview-style)
BUG: the scaled_dot score divides by key_dim instead of sqrt(key_dim).
STAGE: scaled scores
WHEN: score="scaled_dot" only
"""
import torch
from torch import nn


def _masked_softmax(scores, valid_lens):
    if valid_lens is None:
        return scores.softmax(-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    allowed = torch.arange(scores.shape[-1], device=scores.device) < valid_lens[..., None]
    out = torch.where(allowed, scores, torch.finfo(scores.dtype).min).softmax(-1)
    return torch.where(allowed, out, 0.0)


class LuongAttention(nn.Module):
    _SCORES = ("dot", "scaled_dot", "general", "concat")

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in self._SCORES:
            raise ValueError(f"unknown score {score!r}; expected one of {self._SCORES}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"{score}: query_dim ({query_dim}) != key_dim ({key_dim})")
        if score == "concat" and attn_dim is None:
            raise ValueError("concat: attn_dim is required")
        self.score = score
        self.key_dim = key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _scores(self, q, k):
        if self.score == "dot":
            return torch.einsum("bqd,bkd->bqk", q, k)
        if self.score == "scaled_dot":
            return torch.einsum("bqd,bkd->bqk", q, k) / self.key_dim
        if self.score == "general":
            return torch.einsum("bqd,bkd->bqk", q, self.W_a(k))
        # concat: W_a [q; k] = W_a[:, :dq] q + W_a[:, dq:] k
        dq = q.shape[-1]
        Wq, Wk = self.W_a.weight[:, :dq], self.W_a.weight[:, dq:]
        hidden = torch.tanh(torch.einsum("bqd,hd->bqh", q, Wq)[:, :, None] + torch.einsum("bkd,hd->bkh", k, Wk)[:, None])
        return self.v_a(hidden).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        weights = _masked_softmax(self._scores(queries, keys), valid_lens)
        return torch.einsum("bqk,bkd->bqd", self.dropout(weights), values), weights
