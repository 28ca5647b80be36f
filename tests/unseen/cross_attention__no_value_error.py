"""BUG: no ValueError when both memory and cache are None (crashes later with AttributeError/TypeError) features n*d:(n+1)*d, concatenation of head contexts, hand-written stable softmax)
STAGE: argument checking (memory=None without a cache)
"""
import math
import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim % num_heads != 0")
        kdim = memory_dim or embed_dim
        self.num_heads = num_heads
        self.d = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(kdim, embed_dim)
        self.W_v = nn.Linear(kdim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        d = self.d
        Q = self.W_q(x)                                             # (B, Tq, E)
        if cache is None:
            K = self.W_k(memory)
            V = self.W_v(memory)
            ks = [K[..., n * d:(n + 1) * d] for n in range(self.num_heads)]
            vs = [V[..., n * d:(n + 1) * d] for n in range(self.num_heads)]
            cache = (torch.stack(ks, 1), torch.stack(vs, 1))      # (B, H, S, d)
        k, v = cache
        ctxs, ws = [], []
        for n in range(self.num_heads):
            qn = Q[..., n * d:(n + 1) * d]                          # (B, Tq, d)
            sc = qn @ k[:, n].transpose(1, 2) / math.sqrt(d)        # (B, Tq, S)
            if memory_mask is not None:
                mk = memory_mask[:, None, :]
                mx = sc.masked_fill(~mk, float("-inf")).amax(-1, keepdim=True)
                mx = torch.nan_to_num(mx, neginf=0.0).detach()
                e = torch.exp((sc - mx).masked_fill(~mk, 0.0)) * mk
            else:
                e = torch.exp(sc - sc.amax(-1, keepdim=True).detach())
            z = e.sum(-1, keepdim=True)
            w = e / torch.where(z > 0, z, torch.ones_like(z))
            ws.append(w)
            ctxs.append(self.attn_drop(w) @ v[:, n])
        return self.W_o(torch.cat(ctxs, dim=-1)), torch.stack(ws, 1), cache
