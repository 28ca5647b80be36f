"""BUG: none
STYLE: d2l-style: heads folded into the batch axis (B*H, ...), valid_lens repeat_interleave'd per head, a 3-D masked softmax (-inf fill, NaN rows zeroed by the mask), bmm with values repeated per head, heads unfolded.
"""
import torch
from torch import nn


def _masked_softmax3d(X, valid_lens):
    """X: (N, Tq, Tk); valid_lens None, (N,) or (N, Tq)."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    N, Tq, Tk = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, Tq)
    else:
        valid_lens = valid_lens.reshape(-1)
    mask = torch.arange(Tk, device=X.device)[None, :] < valid_lens[:, None]
    mask = mask.reshape(N, Tq, Tk)
    Y = nn.functional.softmax(X.masked_fill(~mask, float("-inf")), dim=-1)
    return Y.masked_fill(~mask, 0.0)


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) * 0.1)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _fold(self, X):
        # (B, T, H*h) -> (B*H, T, h)
        B, T, _ = X.shape
        X = X.reshape(B, T, self.num_heads, -1).permute(0, 2, 1, 3)
        return X.reshape(B * self.num_heads, T, -1)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, dv = values.shape[1], values.shape[2]
        H = self.num_heads
        q = self._fold(self.W_q(queries))  # (B*H, Tq, h)
        k = self._fold(self.W_k(keys))  # (B*H, Tk, h)
        w_v = self.w_v.repeat(B, 1)  # (B*H, h): row b*H + n is w_v[n]
        feats = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))  # (B*H, Tq, Tk, h)
        scores = (feats @ w_v[:, None, :, None]).squeeze(-1)  # (B*H, Tq, Tk)
        lens = None
        if valid_lens is not None:
            lens = torch.repeat_interleave(valid_lens.to(queries.device), H, dim=0)
        attn = _masked_softmax3d(scores, lens)
        v_rep = torch.repeat_interleave(values, H, dim=0)  # (B*H, Tk, dv)
        ctx = torch.bmm(self.dropout(attn), v_rep)  # (B*H, Tq, dv)
        ctx = ctx.reshape(B, H, Tq, dv).permute(0, 2, 1, 3).reshape(B, Tq, H * dv)
        return self.W_o(ctx), attn.reshape(B, H, Tq, Tk)
