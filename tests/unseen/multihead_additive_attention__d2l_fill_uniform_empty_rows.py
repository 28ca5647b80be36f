"""BUG: the d2l masked softmax: masked scores are replaced by -1e6 and the softmax is returned as is, so a row with valid_len 0 becomes uniform over all keys instead of all zeros (and its output is not 0).
STAGE: the mask
"""
import torch
from torch import nn


def _sequence_mask(X, valid_len, value=0.0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def _masked_softmax(X, valid_lens):
    """X: (N, Tq, Tk); valid_lens None, (N,) or (N, Tq)."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


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
        B, T, _ = X.shape
        X = X.reshape(B, T, self.num_heads, -1).permute(0, 2, 1, 3)
        return X.reshape(B * self.num_heads, T, -1)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, dv = values.shape[1], values.shape[2]
        H = self.num_heads
        q = self._fold(self.W_q(queries))
        k = self._fold(self.W_k(keys))
        w_v = self.w_v.repeat(B, 1)
        feats = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))
        scores = (feats @ w_v[:, None, :, None]).squeeze(-1)
        lens = None
        if valid_lens is not None:
            lens = torch.repeat_interleave(valid_lens.to(queries.device), H, dim=0)
        attn = _masked_softmax(scores, lens)
        v_rep = torch.repeat_interleave(values, H, dim=0)
        ctx = torch.bmm(self.dropout(attn), v_rep)
        ctx = ctx.reshape(B, H, Tq, dv).permute(0, 2, 1, 3).reshape(B, Tq, H * dv)
        return self.W_o(ctx), attn.reshape(B, H, Tq, Tk)
