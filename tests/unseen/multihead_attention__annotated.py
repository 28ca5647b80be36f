"""BUG: none
STYLE: The Annotated Transformer (harvardnlp): attention() helper, view(nbatches, -1, h, d_k) .transpose(1, 2), masked_fill(mask == 0, ...), self.attn kept on the module.
"""
import math
import torch
from torch import nn


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        # rows with no allowed key would be uniform: zero them
        p_attn = p_attn.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    p_drop = dropout(p_attn) if dropout is not None else p_attn
    return torch.matmul(p_drop, value), p_attn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.d_k = embed_dim // num_heads
        self.h = num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(p=dropout)
        self.attn = None

    def forward(self, queries, keys, values, mask=None):
        nbatches = queries.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.W_q, self.W_k, self.W_v), (queries, keys, values))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.W_o(x), self.attn
