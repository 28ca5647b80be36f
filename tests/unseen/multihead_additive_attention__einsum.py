"""BUG: none
STYLE: broadcasting + einsum, all heads at once; masking with an additive bias built from a boolean mask (finite finfo.min, then the mask multiplied back in)
"""
import torch
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) / attn_dim ** 0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, dv = keys.shape[1], values.shape[-1]
        H, h = self.num_heads, self.attn_dim
        q = self.W_q(queries).view(B, Tq, H, h)
        k = self.W_k(keys).view(B, Tk, H, h)
        feats = torch.tanh(q[:, :, None] + k[:, None])              # (B, Tq, Tk, H, h)
        scores = torch.einsum("bijnh,nh->bnij", feats, self.w_v)      # (B, H, Tq, Tk)
        if valid_lens is None:
            weights = scores.softmax(dim=-1)
        else:
            lens = valid_lens.view(B, 1) if valid_lens.dim() == 1 else valid_lens
            keep = (torch.arange(Tk, device=scores.device) < lens[..., None])[:, None]  # (B,1,Tq|1,Tk)
            bias = torch.zeros(keep.shape, dtype=scores.dtype, device=scores.device)
            bias = bias.masked_fill(~keep, torch.finfo(scores.dtype).min)
            weights = (scores + bias).softmax(dim=-1) * keep
        ctx = torch.einsum("bnij,bjd->bind", self.dropout(weights), values)  # (B, Tq, H, dv)
        return self.W_o(ctx.reshape(B, Tq, H * dv)), weights
