"""STYLE: d2l.ai multi-head pattern (heads folded into the batch axis, valid_lens repeated per head)
BUG: valid_lens is tiled with .repeat(H) instead of repeat_interleave(H), so the folded (b*H + n) rows get another batch row's lengths.
STAGE: masked scores
WHEN: valid_lens given with B > 1 and H > 1 and different lengths across the batch
"""
import torch
from torch import nn


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    X = X.masked_fill(~mask, torch.finfo(X.dtype).min)
    return (nn.functional.softmax(X, dim=-1) * mask).reshape(shape)


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) / attn_dim ** 0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def transpose_qkv(self, X):
        # (B, T, H*h) -> (B*H, T, h)
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        H = self.num_heads
        q = self.transpose_qkv(self.W_q(queries))  # (B*H, Tq, h)
        k = self.transpose_qkv(self.W_k(keys))  # (B*H, Tk, h)
        features = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))  # (B*H, Tq, Tk, h)
        w = self.w_v.repeat(B, 1)  # (B*H, h): row b*H + n is head n
        scores = torch.einsum("ntkh,nh->ntk", features, w)
        if valid_lens is not None:
            valid_lens = valid_lens.repeat(H, *([1] * (valid_lens.dim() - 1)))
        weights = masked_softmax(scores, valid_lens)  # (B*H, Tq, Tk)
        vals = values.repeat_interleave(H, dim=0)  # (B*H, Tk, dv)
        context = torch.bmm(self.dropout(weights), vals)  # (B*H, Tq, dv)
        context = context.reshape(B, H, Tq, -1).permute(0, 2, 1, 3).reshape(B, Tq, -1)
        return self.W_o(context), weights.reshape(B, H, Tq, Tk)
