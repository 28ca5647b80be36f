"""BUG: valid_lens is accepted but never used; a plain softmax over all keys lets queries attend to padding.
STAGE: the mask
"""
import torch
from torch import nn
import torch.nn.functional as F


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        q = self.W_q(queries).unsqueeze(2)
        k = self.W_k(keys).unsqueeze(1)
        scores = self.w_v(torch.tanh(q + k)).squeeze(-1)
        weights = F.softmax(scores, dim=-1)
        return torch.bmm(self.dropout(weights), values), weights
