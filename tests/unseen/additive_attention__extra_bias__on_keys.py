"""A bias on W_k (the catalogue has it on W_q), written with an explicit scorer."""
import torch
import torch.nn as nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        q, k = self.W_q(queries), self.W_k(keys)
        feats = torch.tanh(q[:, :, None, :] + k[:, None, :, :])
        scores = self.w_v(feats)[..., 0]
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values), self.attention_weights
