"""BUG: the projections are split as view(B, T, h, H) (head index fastest) instead of view(B, T, H, h), so head n does not use rows n*attn_dim:(n+1)*attn_dim of W_q and W_k.
STAGE: the scores
"""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim, self.value_dim = num_heads, attn_dim, value_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) / attn_dim ** 0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        H, h = self.num_heads, self.attn_dim
        q = self.W_q(queries).view(B, Tq, h, H).permute(0, 3, 1, 2)   # (B, H, Tq, h)
        k = self.W_k(keys).view(B, Tk, h, H).permute(0, 3, 1, 2)      # (B, H, Tk, h)
        feats = torch.tanh(q[:, :, :, None, :] + k[:, :, None, :, :])  # (B, H, Tq, Tk, h)
        scores = torch.einsum("bnqkh,nh->bnqk", feats, self.w_v)
        # masked_softmax wants (B, rows, Tk): fold the heads into the query axis.
        # (B,) lengths broadcast over all rows as they are; (B, Tq) lengths are tiled once per head.
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens.repeat(1, H)                      # entry n * Tq + i = valid_lens[b, i]
        weights = masked_softmax(scores.reshape(B, H * Tq, Tk), valid_lens).reshape(B, H, Tq, Tk)
        context = torch.einsum("bnqk,bkd->bqnd", self.attn_drop(weights), values)
        context = context.reshape(B, Tq, H * self.value_dim)
        return self.W_o(context), weights
