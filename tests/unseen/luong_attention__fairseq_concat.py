"""STYLE: fairseq-style attention layer (explicit src/tgt naming, input_proj helpers, additive score for "concat")
BUG: The "concat" score concatenates the key before the query ([k_j ; q_i]) instead of query first.
STAGE: scores
WHEN: score="concat" (every input).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        valid = ("dot", "scaled_dot", "general", "concat")
        if score not in valid:
            raise ValueError(f"unknown attention score {score!r}; valid choices: {', '.join(valid)}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(f"{score} attention requires query_dim == key_dim ({query_dim} != {key_dim})")
        if score == "concat" and attn_dim is None:
            raise ValueError("concat attention requires attn_dim")
        self.score_type = score
        self.scaling = 1.0 / math.sqrt(key_dim)
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout_module = nn.Dropout(dropout)

    def _dot_scores(self, input, source_hids):
        return torch.bmm(input, source_hids.transpose(1, 2))

    def _concat_scores(self, input, source_hids):
        tgt_len, src_len = input.size(1), source_hids.size(1)
        src = source_hids.unsqueeze(1).expand(-1, tgt_len, -1, -1)
        tgt = input.unsqueeze(2).expand(-1, -1, src_len, -1)
        x = torch.cat((src, tgt), dim=-1)
        return self.v_a(torch.tanh(self.W_a(x))).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.score_type == "dot":
            attn_scores = self._dot_scores(queries, keys)
        elif self.score_type == "scaled_dot":
            attn_scores = self._dot_scores(queries, keys) * self.scaling
        elif self.score_type == "general":
            attn_scores = self._dot_scores(queries, self.W_a(keys))
        else:
            attn_scores = self._concat_scores(queries, keys)
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1)
            key_padding_mask = torch.arange(keys.size(1), device=keys.device) >= lens.unsqueeze(-1)
            attn_scores = attn_scores.masked_fill(key_padding_mask, torch.finfo(attn_scores.dtype).min)
            attn_probs = F.softmax(attn_scores, dim=-1).masked_fill(key_padding_mask, 0.0)
        else:
            attn_probs = F.softmax(attn_scores, dim=-1)
        attn = torch.bmm(self.dropout_module(attn_probs), values)
        return attn, attn_probs
