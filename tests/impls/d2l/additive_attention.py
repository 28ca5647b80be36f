"""Correct: the textbook version (unsqueeze and broadcast), attribute named differently."""
import torch
from torch import nn

from . import masked_softmax as ms


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0, **kwargs):
        super(AdditiveAttention, self).__init__(**kwargs)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = ms.masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values), self.attention_weights
