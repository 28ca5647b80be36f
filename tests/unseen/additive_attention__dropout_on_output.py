"""BUG: dropout(weights @ values) instead of dropout(weights) @ values
STYLE: d2l.ai
"""
"""Additive attention with dropout on the attention output, as Keras' AdditiveAttention users
often add a Dropout layer after the attention layer.

BUG: the contract drops attention weights (output = dropout(weights) @ values); dropping the
output instead zeroes whole output features independently. Only train() with 0 < dropout < 1
shows it (with dropout = 1 both give 0).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def _softmax(scores, valid_lens):
        if valid_lens is None:
            return F.softmax(scores, dim=-1)
        Tk = scores.shape[-1]
        lens = valid_lens.unsqueeze(-1) if valid_lens.dim() == 2 else valid_lens[:, None, None]
        keep = torch.arange(Tk, device=scores.device) < lens
        keep = keep.expand_as(scores)
        s = torch.where(keep, scores, torch.full_like(scores, -float("inf")))
        top = s.max(dim=-1, keepdim=True).values.detach()
        top = torch.where(top.isfinite(), top, torch.zeros_like(top))
        ex = torch.where(keep, torch.exp(s - top), torch.zeros_like(s))
        den = ex.sum(-1, keepdim=True)
        return ex / torch.where(den > 0, den, torch.ones_like(den))

    def forward(self, queries, keys, values, valid_lens=None):
        scores = self.w_v(torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))).squeeze(-1)
        weights = self._softmax(scores, valid_lens)
        return self.dropout(torch.bmm(weights, values)), weights
