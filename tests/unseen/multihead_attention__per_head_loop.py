"""BUG: none
STYLE: weights sliced per head with F.linear, a -inf-safe softmax, cat
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _softmax_allowed(scores, allowed):
    s = scores.masked_fill(~allowed, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = m.masked_fill(~torch.isfinite(m), 0.0).detach()
    e = (s - m).exp()
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)


class MultiHeadAttention(nn.Module):
    """One head at a time, slicing the projection weights (like a CS224n-style loop)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} not divisible by num_heads={num_heads}")
        self.E, self.H, self.d = embed_dim, num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.p = dropout

    def forward(self, queries, keys, values, mask=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        allowed = None
        if mask is not None:
            allowed = mask.expand(B, self.H, Tq, Tk)
        contexts, weights = [], []
        for n in range(self.H):
            sl = slice(n * self.d, (n + 1) * self.d)
            q = F.linear(queries, self.W_q.weight[sl], self.W_q.bias[sl])
            k = F.linear(keys, self.W_k.weight[sl], self.W_k.bias[sl])
            v = F.linear(values, self.W_v.weight[sl], self.W_v.bias[sl])
            s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.d)
            a = torch.softmax(s, -1) if allowed is None else _softmax_allowed(s, allowed[:, n])
            weights.append(a)
            contexts.append(torch.bmm(F.dropout(a, self.p, self.training), v))
        return self.W_o(torch.cat(contexts, dim=-1)), torch.stack(weights, dim=1)
