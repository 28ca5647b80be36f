"""Correct: einsum scores, validation with a dict of modes."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    MODES = {"dot", "scaled_dot", "general", "concat"}

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        if score not in self.MODES:
            raise ValueError(f"score must be one of {sorted(self.MODES)}")
        if score in {"dot", "scaled_dot"} and query_dim != key_dim:
            raise ValueError("dot scores need query_dim == key_dim")
        self.score = score
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if score == "concat":
            if attn_dim is None:
                raise ValueError("concat needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.score == "dot":
            s = torch.einsum("bqd,bkd->bqk", queries, keys)
        elif self.score == "scaled_dot":
            s = torch.einsum("bqd,bkd->bqk", queries, keys) / keys.shape[-1] ** 0.5
        elif self.score == "general":
            s = torch.einsum("bqd,de,bke->bqk", queries, self.W_a.weight, keys)
        else:
            B, Tq, dq = queries.shape
            Tk = keys.shape[1]
            q = queries[:, :, None, :].expand(B, Tq, Tk, dq)
            k = keys[:, None, :, :].expand(B, Tq, Tk, keys.shape[-1])
            s = torch.einsum("bqkh,h->bqk", torch.tanh(self.W_a(torch.cat((q, k), -1))), self.v_a.weight[0])
        w = masked_softmax(s, valid_lens)
        return torch.einsum("bqk,bkv->bqv", self.dropout(w), values), w
