"""BUG: none
STYLE: functional style: F.linear on the registered weights, einsum for the w_v contraction and the weighted sum, F.dropout gated on self.training.
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
        self.p = float(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        q = F.linear(queries, self.W_q.weight)              # (B, Tq, h)
        k = F.linear(keys, self.W_k.weight)                 # (B, Tk, h)
        hidden = torch.tanh(q[:, :, None, :] + k[:, None, :, :])   # (B, Tq, Tk, h)
        scores = torch.einsum("bqkh,h->bqk", hidden, self.w_v.weight[0])
        weights = masked_softmax(scores, valid_lens)
        dropped = F.dropout(weights, p=self.p, training=self.training)
        output = torch.einsum("bqk,bkd->bqd", dropped, values)
        return output, weights
