"""general: W_a applied to the query (Linear(query_dim, key_dim)), written per mode with if/elif."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in ("dot", "scaled_dot", "general", "concat"):
            raise ValueError(f"unknown score {score!r}: use dot, scaled_dot, general or concat")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("dot scores need query_dim == key_dim")
        self.score, self.key_dim = score, key_dim
        if score == "general":
            self.W_a = nn.Linear(query_dim, key_dim, bias=False)
        elif score == "concat":
            if attn_dim is None:
                raise ValueError("concat needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.score == "dot":
            scores = torch.einsum("bqd,bkd->bqk", queries, keys)
        elif self.score == "scaled_dot":
            scores = torch.einsum("bqd,bkd->bqk", queries, keys) / self.key_dim ** 0.5
        elif self.score == "general":
            scores = torch.einsum("bqd,bkd->bqk", self.W_a(queries), keys)
        else:
            Tq, Tk = queries.shape[1], keys.shape[1]
            q = queries[:, :, None, :].expand(-1, -1, Tk, -1)
            k = keys[:, None, :, :].expand(-1, Tq, -1, -1)
            scores = self.v_a(torch.tanh(self.W_a(torch.cat([q, k], -1)))).squeeze(-1)
        weights = masked_softmax(scores, valid_lens)
        return self.dropout(weights) @ values, weights
