"""BUG: the projected queries/keys are split with view(B, T, attn_dim, H) and the head axis taken last, so head n uses the strided rows n, n+H, n+2H, ... of W_q/W_k instead of rows n*h:(n+1)*h. Differs on: any input with num_heads > 1 and attn_dim > 1.
STAGE: per-head projected queries/keys (q[:, :, n], k[:, :, n]) -> scores
STYLE: transformer-style reshape/permute head splitting with the two factors swapped
"""
import torch
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) * 0.1)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, dv = keys.shape[1], values.shape[-1]
        H, h = self.num_heads, self.attn_dim
        q = self.W_q(queries).view(B, Tq, h, H).permute(0, 3, 1, 2)   # (B, H, Tq, h)
        k = self.W_k(keys).view(B, Tk, h, H).permute(0, 3, 1, 2)      # (B, H, Tk, h)
        feats = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))            # (B, H, Tq, Tk, h)
        scores = (feats * self.w_v[None, :, None, None, :]).sum(-1)
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            keep = (torch.arange(Tk, device=scores.device) < lens[..., None]).unsqueeze(1)
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1) * keep
        else:
            weights = torch.softmax(scores, dim=-1)
        ctx = self.dropout(weights) @ values.unsqueeze(1)               # (B, H, Tq, dv)
        ctx = ctx.transpose(1, 2).reshape(B, Tq, H * dv)
        return self.W_o(ctx), weights
