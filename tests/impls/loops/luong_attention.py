"""Correct: concat by splitting W_a into its query and key halves; errors checked first."""
import math

import torch
from torch import nn
import torch.nn.functional as F

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        choices = ["dot", "scaled_dot", "general", "concat"]
        if score not in choices:
            raise ValueError(f"unknown score {score}; valid: {choices}")
        if score.endswith("dot") and query_dim != key_dim:
            raise ValueError("dimension mismatch")
        if score == "concat" and attn_dim is None:
            raise ValueError("attn_dim required")
        self.mode, self.dq = score, query_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.p = dropout

    def forward(self, queries, keys, values, valid_lens=None):
        if self.mode == "concat":
            wq, wk = self.W_a.weight[:, : self.dq], self.W_a.weight[:, self.dq :]
            feats = torch.tanh(F.linear(queries, wq)[:, :, None] + F.linear(keys, wk)[:, None])
            scores = self.v_a(feats)[..., 0]
        elif self.mode == "general":
            scores = torch.bmm(queries, self.W_a(keys).permute(0, 2, 1))
        else:
            scores = torch.bmm(queries, keys.permute(0, 2, 1))
            if self.mode == "scaled_dot":
                scores = scores * (1.0 / math.sqrt(keys.shape[-1]))
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(F.dropout(weights, self.p, self.training), values), weights
