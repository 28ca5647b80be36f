"""BUG: none
STYLE: course-solution style with an explicit Python loop over heads, slicing features n*d:(n+1)*d, einsum per head, torch.cat of the contexts.
"""
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads must be 0")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        Q = self.W_q(queries)
        K = self.W_k(keys)
        V = self.W_v(values)
        B, Tq, _ = Q.shape
        Tk = K.shape[1]
        d = self.head_dim

        if mask is not None:
            full_mask = torch.broadcast_to(mask, (B, self.num_heads, Tq, Tk))

        contexts, all_weights = [], []
        for n in range(self.num_heads):
            q_n = Q[..., n * d:(n + 1) * d]
            k_n = K[..., n * d:(n + 1) * d]
            v_n = V[..., n * d:(n + 1) * d]
            s = torch.einsum("bqd,bkd->bqk", q_n, k_n) / math.sqrt(d)
            if mask is not None:
                m = full_mask[:, n]
                s = torch.where(m, s, torch.full_like(s, float("-inf")))
                w = torch.softmax(s, dim=-1)
                w = torch.where(m.any(-1, keepdim=True), w, torch.zeros_like(w))
            else:
                w = torch.softmax(s, dim=-1)
            all_weights.append(w)
            contexts.append(torch.einsum("bqk,bkd->bqd", self.drop(w), v_n))

        concat = torch.cat(contexts, dim=-1)
        return self.W_o(concat), torch.stack(all_weights, dim=1)
