"""STYLE: Annotated Transformer MultiHeadedAttention (linears applied with zip, then attention())
BUG: the keys are projected from the values argument (copy-paste: W_k(values)) instead of from keys.
STAGE: projections
WHEN: keys != values (cross-attention with distinct key/value inputs); self-attention and keys is values are right
"""
import math

import torch
from torch import nn


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        p_attn = p_attn.masked_fill(mask == 0, 0.0)
    weights = p_attn
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), weights


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("d_model must be divisible by h")
        self.d_k = embed_dim // num_heads
        self.h = num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, queries, keys, values, mask=None):
        nbatches = queries.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.W_q, self.W_k, self.W_v), (queries, values, values))
        ]
        x, attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.W_o(x), attn
