"""BUG: none
STYLE: teaching code that loops over heads with feature slices n*d:(n+1)*d (like the "MultiHead as a list of single heads" notebooks), stacking per-head weights, one dropout module.
"""
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads != 0")
        self.E, self.H, self.d = embed_dim, num_heads, embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        q_all, k_all, v_all = self.W_q(queries), self.W_k(keys), self.W_v(values)
        B, Tq, _ = q_all.shape
        Tk = k_all.shape[1]
        contexts, weights = [], []
        for n in range(self.H):
            sl = slice(n * self.d, (n + 1) * self.d)
            s = q_all[..., sl] @ k_all[..., sl].transpose(1, 2) / math.sqrt(self.d)   # (B, Tq, Tk)
            if mask is not None:
                m = torch.broadcast_to(mask, (B, self.H, Tq, Tk))[:, n]
                s = s.masked_fill(~m, float("-inf"))
                live = m.any(-1, keepdim=True)
                s = s.masked_fill(~live, 0.0)
                w = torch.softmax(s, dim=-1).masked_fill(~live, 0.0)
            else:
                w = torch.softmax(s, dim=-1)
            weights.append(w)
            contexts.append(self.drop(w) @ v_all[..., sl])
        out = self.W_o(torch.cat(contexts, dim=-1))
        return out, torch.stack(weights, dim=1)
