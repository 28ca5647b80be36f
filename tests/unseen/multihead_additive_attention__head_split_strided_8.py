"""BUG: view(B, T, a, H): head n gets rows n, n + H, ...
STYLE: view
"""
"""Multi-head additive attention, vectorised.

BUG: the projections are split with view(B, T, attn_dim, H) (head as the fastest axis), so head
n gets rows n, n+H, n+2H, ... of W_q/W_k instead of the contiguous block n*a:(n+1)*a the contract
pins. Invisible with one head.
"""
import torch
import torch.nn as nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.H, self.a = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) * 0.1)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        q = self.W_q(queries).view(B, Tq, self.a, self.H).permute(0, 3, 1, 2)   # (B, H, Tq, a)
        k = self.W_k(keys).view(B, Tk, self.a, self.H).permute(0, 3, 1, 2)      # (B, H, Tk, a)
        f = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))                          # (B, H, Tq, Tk, a)
        scores = (f * self.w_v[None, :, None, None, :]).sum(-1)
        if valid_lens is not None:
            vl = valid_lens[:, None, None, None] if valid_lens.dim() == 1 else valid_lens[:, None, :, None]
            keep = torch.arange(Tk, device=scores.device) < vl
        else:
            keep = torch.ones_like(scores, dtype=torch.bool)
        keep = keep.expand_as(scores)
        scores = scores.masked_fill(~keep, -1e30 if scores.dtype == torch.float64 else -1e30)
        w = torch.softmax(scores, -1) * keep
        ctx = self.dropout(w) @ values[:, None]                                # (B, H, Tq, dv)
        ctx = ctx.transpose(1, 2).reshape(B, Tq, -1)
        return self.W_o(ctx), w
