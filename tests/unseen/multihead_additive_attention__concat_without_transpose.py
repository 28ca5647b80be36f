"""STYLE: vectorised (B, H, Tq, Tk, h) multi-head additive attention with einsum scoring
BUG: the per-head contexts (B, H, Tq, dv) are reshaped straight to (B, Tq, H*dv) without moving the head axis next to the features.
STAGE: merge
WHEN: H > 1 and Tq > 1
"""
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.H, self.h = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim))
        nn.init.xavier_uniform_(self.w_v)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        q = self.W_q(queries).unflatten(-1, (self.H, self.h))  # (B, Tq, H, h)
        k = self.W_k(keys).unflatten(-1, (self.H, self.h))  # (B, Tk, H, h)
        feats = torch.tanh(q[:, :, None] + k[:, None])  # (B, Tq, Tk, H, h)
        scores = torch.einsum("bqkHh,Hh->bHqk", feats, self.w_v)  # (B, H, Tq, Tk)
        if valid_lens is not None:
            lens = valid_lens.view(B, 1, -1, 1)  # (B, 1, 1|Tq, 1)
            keep = torch.arange(Tk, device=scores.device) < lens
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
            weights = F.softmax(scores, dim=-1) * keep
        else:
            weights = F.softmax(scores, dim=-1)
        ctx = torch.einsum("bHqk,bkd->bHqd", self.drop(weights), values)  # (B, H, Tq, dv)
        ctx = ctx.reshape(B, Tq, -1)
        return self.W_o(ctx), weights
