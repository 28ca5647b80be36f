"""BUG: none
STYLE: d2l.ai's module with a fixed masked_softmax
"""
"""Additive attention as in d2l.ai (section 11.3), with masked_softmax fixed: masked scores
never enter the exponential, and a row with valid_len 0 is all zeros.
"""
import torch
from torch import nn


def masked_softmax(X, valid_lens):
    """Softmax over the last axis of X (B, Tq, Tk) with valid_lens (B,) or (B, Tq)."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    row_max = torch.where(mask, X, torch.full_like(X, float("-inf"))).amax(-1, keepdim=True)
    row_max = torch.nan_to_num(row_max, neginf=0.0).detach()
    e = torch.exp(torch.where(mask, X - row_max, torch.zeros_like(X))) * mask
    s = e.sum(-1, keepdim=True)
    return (e / s.masked_fill(s == 0, 1.0)).reshape(shape)


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        queries, keys = self.W_q(queries), self.W_k(keys)
        # queries (B, Tq, 1, h) + keys (B, 1, Tk, h): broadcast sum
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values), self.attention_weights
