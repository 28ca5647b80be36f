"""BUG: none
STYLE: memory-lean rewrite: general grouped as (q W_a) . k with einsum over W_a.weight; concat split as W_a[q; k] = W_q q + W_k k using column slices of W_a.weight (no (B,Tq,Tk,dq+dk) cat); masked softmax through logsumexp with torch.where.
"""
import math
import torch
from torch import nn
import torch.nn.functional as F


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super().__init__()
        valid = ("dot", "scaled_dot", "general", "concat")
        if not isinstance(score, str) or score not in valid:
            raise ValueError(f"score must be one of {', '.join(valid)}; got {score!r}")
        if score in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError("dot scores need query_dim == key_dim")
        if score == "concat" and attn_dim is None:
            raise ValueError("score='concat' requires attn_dim")
        self.score, self.dq, self.dk = score, query_dim, key_dim
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif score == "concat":
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _scores(self, q, k):
        if self.score == "dot":
            return torch.einsum('bid,bjd->bij', q, k)
        if self.score == "scaled_dot":
            return torch.einsum('bid,bjd->bij', q, k) / math.sqrt(self.dk)
        if self.score == "general":
            return torch.einsum('bid,de,bje->bij', q, self.W_a.weight, k)
        Wq = self.W_a.weight[:, :self.dq]
        Wk = self.W_a.weight[:, self.dq:]
        energy = torch.tanh(F.linear(q, Wq)[:, :, None, :] + F.linear(k, Wk)[:, None, :, :])
        return torch.einsum('bijh,h->bij', energy, self.v_a.weight[0])

    def forward(self, queries, keys, values, valid_lens=None):
        s = self._scores(queries, keys)
        B, Tq, Tk = s.shape
        if valid_lens is None:
            w = torch.softmax(s, dim=-1)
        else:
            lens = valid_lens.reshape(B, -1, 1)                      # (B, 1, 1) or (B, Tq, 1)
            allowed = torch.arange(Tk, device=s.device).view(1, 1, Tk) < lens
            live = allowed.any(-1, keepdim=True)
            sm = torch.where(allowed, s, torch.full_like(s, float('-inf')))
            sm = torch.where(live, sm, torch.zeros_like(sm))
            lse = torch.logsumexp(sm, dim=-1, keepdim=True)
            w = torch.where(allowed, torch.exp(sm - lse), torch.zeros_like(s))
        return self.dropout(w) @ values, w
