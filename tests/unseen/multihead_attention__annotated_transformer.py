"""BUG: none
STYLE: Annotated Transformer (Harvard NLP) MultiHeadedAttention: list-comprehension projections, view + transpose, a module-level attention() helper.
"""
import math

import torch
from torch import nn


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        # rows where no key is allowed: softmax of all -inf is NaN, the spec wants 0
        p_attn = p_attn.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    p_drop = p_attn
    if dropout is not None:
        p_drop = dropout(p_attn)
    return torch.matmul(p_drop, value), p_attn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        "Take in model size and number of heads."
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        # We assume d_v always equals d_k
        self.d_k = embed_dim // num_heads
        self.h = num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
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
        del query
        del key
        del value
        return self.W_o(x), self.attn
