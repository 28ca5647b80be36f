"""BUG: F.dropout is called without training=self.training, so it defaults to training=True and keeps dropping weights in eval() mode.
STAGE: dropout
"""
import torch
from torch import nn
import torch.nn.functional as F

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.p = dropout

    def forward(self, queries, keys, values, valid_lens=None):
        q = self.W_q(queries)
        k = self.W_k(keys)
        hidden = torch.tanh(q[:, :, None, :] + k[:, None, :, :])
        scores = torch.einsum("bqkh,h->bqk", hidden, self.w_v.weight[0])
        weights = masked_softmax(scores, valid_lens)
        output = torch.einsum("bqk,bkd->bqd", F.dropout(weights, p=self.p), values)
        return output, weights
