"""STYLE: PyTorch chatbot tutorial (Luong "Attn" module with dot/general/concat score methods)
BUG: in the concat score the pair is built as [k_j ; q_i] (key first) instead of [q_i ; k_j].
STAGE: scores
WHEN: score="concat" only
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        self.method = score
        if self.method not in ["dot", "scaled_dot", "general", "concat"]:
            raise ValueError(self.method, "is not an appropriate attention method; choose dot, scaled_dot, general or concat.")
        if self.method in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("dot scores need query_dim == key_dim")
        self.key_dim = key_dim
        if self.method == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif self.method == "concat":
            if attn_dim is None:
                raise ValueError("concat attention needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def dot_score(self, queries, keys):
        return torch.bmm(queries, keys.transpose(1, 2))

    def general_score(self, queries, keys):
        energy = self.W_a(keys)
        return torch.bmm(queries, energy.transpose(1, 2))

    def concat_score(self, queries, keys):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        energy = self.W_a(
            torch.cat((keys.unsqueeze(1).expand(B, Tq, Tk, -1), queries.unsqueeze(2).expand(B, Tq, Tk, -1)), 3)
        ).tanh()
        return self.v_a(energy).squeeze(3)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.method == "general":
            attn_energies = self.general_score(queries, keys)
        elif self.method == "concat":
            attn_energies = self.concat_score(queries, keys)
        else:
            attn_energies = self.dot_score(queries, keys)
            if self.method == "scaled_dot":
                attn_energies = attn_energies / math.sqrt(self.key_dim)
        if valid_lens is None:
            weights = F.softmax(attn_energies, dim=-1)
        else:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1)
            keep = torch.arange(attn_energies.size(2), device=attn_energies.device) < lens.unsqueeze(2)
            attn_energies = attn_energies.masked_fill(~keep, torch.finfo(attn_energies.dtype).min)
            weights = F.softmax(attn_energies, dim=-1) * keep
        return torch.bmm(self.dropout(weights), values), weights
