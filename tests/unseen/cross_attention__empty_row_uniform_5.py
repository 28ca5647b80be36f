"""BUG: masked positions filled with -1e9 and no guard: a batch row whose memory_mask is all False gets uniform weights 1/S (and the mean of v as context) instead of weights 0 and context 0.
STAGE: the weights
STYLE: The Annotated Transformer's attention() (masked_fill(mask == 0, -1e9)) used as a src-attn layer
"""
import math
import torch
from torch import nn


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    p_drop = dropout(p_attn) if dropout is not None else p_attn
    return torch.matmul(p_drop, value), p_attn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        memory_dim = memory_dim or embed_dim
        self.h, self.d_k = num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        nbatches = x.size(0)
        if cache is None:
            if memory is None:
                raise ValueError("memory=None needs a cache")
            key = self.W_k(memory).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            value = self.W_v(memory).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
        else:
            key, value = cache
        query = self.W_q(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
        mask = None if memory_mask is None else memory_mask.unsqueeze(1).unsqueeze(1)
        out, attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        out = out.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.W_o(out), attn, (key, value)
