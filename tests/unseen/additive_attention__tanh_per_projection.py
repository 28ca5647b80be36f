"""STYLE: Keras/TensorFlow Bahdanau tutorial ported to PyTorch (score = V(tanh(W1 q) + tanh(W2 k)) misread)
BUG: tanh is applied to each projection separately (tanh(W_q q) + tanh(W_k k)) instead of to their sum.
STAGE: scores
WHEN: always
"""
import torch
import torch.nn.functional as F
from torch import nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        q = torch.tanh(self.W_q(queries))[:, :, None, :]  # (B, Tq, 1, h)
        k = torch.tanh(self.W_k(keys))[:, None, :, :]  # (B, 1, Tk, h)
        scores = self.w_v(q + k).squeeze(-1)  # (B, Tq, Tk)
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            keep = torch.arange(scores.size(-1), device=scores.device)[None, None, :] < lens[..., None]
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
            weights = F.softmax(scores, dim=-1) * keep
        else:
            weights = F.softmax(scores, dim=-1)
        return torch.bmm(self.dropout(weights), values), weights
