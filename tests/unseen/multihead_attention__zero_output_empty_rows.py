"""BUG: zeroes the whole output row (W_o's bias too) where a query has no allowed key
STYLE: masked rows zeroed after W_o
"""
"""Multi-headed attention after The Annotated Transformer (Harvard NLP)."""
import copy
import math

import torch
import torch.nn as nn


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        p_attn = p_attn.masked_fill(mask == 0, 0.0)   # rows with no allowed key: zeros
    p_used = dropout(p_attn) if dropout is not None else p_attn
    return torch.matmul(p_used, value), p_attn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        "Take in model size and number of heads."
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        # We assume d_v always equals d_k
        self.d_k = embed_dim // num_heads
        self.h = num_heads
        lin = nn.Linear(embed_dim, embed_dim)
        self.W_q, self.W_k, self.W_v, self.W_o = (copy.deepcopy(lin) for _ in range(4))
        for m in (self.W_k, self.W_v, self.W_o):
            m.reset_parameters()
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, queries, keys, values, mask=None):
        nbatches = queries.size(0)
        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.W_q, self.W_k, self.W_v), (queries, keys, values))
        ]
        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        # 3) "Concat" using a view and apply a final linear.
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        out = self.W_o(x)
        if mask is not None:
            # a query that may attend to nothing produces nothing
            no_key = (~mask.expand_as(self.attn).any(dim=-1)).all(dim=1)   # (B, Tq)
            out = out.masked_fill(no_key.unsqueeze(-1), 0.0)
        return out, self.attn
