"""BUG: none
STYLE: every head at once with einsum and a torch.where softmax
"""
"""Multi-head additive attention, all heads at once with einsum (features (B, Tq, Tk, H, a)),
a where-based masked softmax, dropout on the (B, H, Tq, Tk) weights.
"""
import torch
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.h, self.a = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim))
        nn.init.xavier_uniform_(self.w_v)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, dv = keys.shape[1], values.shape[-1]
        q = self.W_q(queries).view(B, Tq, self.h, self.a)
        k = self.W_k(keys).view(B, Tk, self.h, self.a)
        feats = torch.tanh(q[:, :, None] + k[:, None])                      # (B, Tq, Tk, H, a)
        scores = torch.einsum("bijha,ha->bhij", feats, self.w_v)
        if valid_lens is None:
            allowed = torch.ones(1, 1, 1, Tk, dtype=torch.bool, device=scores.device)
        else:
            lens = valid_lens.view(B, 1, 1, 1) if valid_lens.dim() == 1 else valid_lens.view(B, 1, Tq, 1)
            allowed = torch.arange(Tk, device=scores.device).view(1, 1, 1, Tk) < lens
        allowed = allowed.expand_as(scores)
        s = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
        mx = s.amax(-1, keepdim=True)
        mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
        ex = torch.where(allowed, torch.exp(s - mx), torch.zeros_like(s))
        tot = ex.sum(-1, keepdim=True)
        weights = ex / torch.where(tot == 0, torch.ones_like(tot), tot)
        ctx = torch.einsum("bhij,bjd->bihd", self.drop(weights), values).reshape(B, Tq, self.h * dv)
        return self.W_o(ctx), weights
