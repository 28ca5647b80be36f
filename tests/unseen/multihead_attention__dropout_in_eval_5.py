"""BUG: attention dropout is F.dropout(p, self.p) with the default training=True, so it is still active in eval(); differs on any input in eval() with dropout > 0 (train mode is fine).
STAGE: the output (context after dropout)
STYLE: PyTorch-functional port of nn.MultiheadAttention (F.linear on the split in_proj, p stored as float)
"""
import math
import torch
from torch import nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.p = dropout

    def forward(self, queries, keys, values, mask=None):
        B, Tq, E = queries.shape
        Tk = keys.shape[1]
        q = F.linear(queries, self.W_q.weight, self.W_q.bias).view(B, Tq, self.num_heads, self.head_dim).transpose(1, 2)
        k = F.linear(keys, self.W_k.weight, self.W_k.bias).view(B, Tk, self.num_heads, self.head_dim).transpose(1, 2)
        v = F.linear(values, self.W_v.weight, self.W_v.bias).view(B, Tk, self.num_heads, self.head_dim).transpose(1, 2)
        q = q * (1.0 / math.sqrt(self.head_dim))
        attn = q @ k.transpose(-2, -1)
        if mask is not None:
            attn = attn.masked_fill(~mask, float('-inf'))
            live = mask.any(-1, keepdim=True)
            attn = attn.masked_fill(~live, 0.0)
            attn = F.softmax(attn, dim=-1).masked_fill(~live, 0.0)
        else:
            attn = F.softmax(attn, dim=-1)
        ctx = F.dropout(attn, self.p) @ v
        ctx = ctx.transpose(1, 2).reshape(B, Tq, E)
        return F.linear(ctx, self.W_o.weight, self.W_o.bias), attn
