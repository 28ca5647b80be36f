"""BUG: borrows the Transformer's scaling and divides the additive scores by sqrt(attn_dim), which the additive formula does not have.
STAGE: the scores
"""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        scores = self.w_v(features).squeeze(-1) / math.sqrt(self.attn_dim)
        weights = masked_softmax(scores, valid_lens)
        output = torch.matmul(self.dropout(weights), values)
        return output, weights
