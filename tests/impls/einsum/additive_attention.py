"""Correct: einsum throughout, functional dropout."""
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
        q = torch.einsum("bqd,hd->bqh", queries, self.W_q.weight)
        k = torch.einsum("bkd,hd->bkh", keys, self.W_k.weight)
        scores = torch.einsum("bqkh,h->bqk", torch.tanh(q[:, :, None] + k[:, None]), self.w_v.weight[0])
        weights = masked_softmax(scores, valid_lens)
        out = torch.einsum("bqk,bkv->bqv", F.dropout(weights, p=self.p, training=self.training), values)
        return out, weights
