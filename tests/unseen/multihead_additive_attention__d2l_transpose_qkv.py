"""STYLE: Dive into Deep Learning (transpose_qkv / transpose_output helpers, heads folded into the batch axis)
BUG: valid_lens are tiled across heads with torch.cat([valid_lens] * H) instead of repeated per batch row, so folded row b*H + n gets the length of batch row (b*H + n) mod B.
STAGE: masked scores
WHEN: B > 1 and num_heads > 1 with valid_lens that differ between batch rows.
"""
import torch
from torch import nn


def transpose_qkv(X, num_heads):
    """Transposition for parallel computation of multiple attention heads."""
    # (B, T, H * h) -> (B, T, H, h) -> (B, H, T, h) -> (B * H, T, h)
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """Reverse the operation of transpose_qkv."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def sequence_mask(X, valid_len, value=0.0):
    maxlen = X.size(-1)
    lens = valid_len if valid_len.dim() == 2 else valid_len[:, None]
    return torch.arange(maxlen, device=X.device) < lens[..., None]


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    mask = sequence_mask(X, valid_lens)
    X = X.masked_fill(~mask, torch.finfo(X.dtype).min)
    return nn.functional.softmax(X, dim=-1) * mask


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim).uniform_(-attn_dim ** -0.5, attn_dim ** -0.5))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        batch_size = queries.shape[0]
        queries = transpose_qkv(self.W_q(queries), self.num_heads)  # (B*H, Tq, h)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)  # (B*H, Tk, h)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))  # (B*H, Tq, Tk, h)
        w_v = self.w_v.repeat(batch_size, 1)  # (B*H, h): row b*H + n is w_v[n]
        scores = (features * w_v[:, None, None, :]).sum(-1)  # (B*H, Tq, Tk)
        if valid_lens is not None:
            valid_lens = torch.cat([valid_lens] * self.num_heads, dim=0)
        self.attention_weights = masked_softmax(scores, valid_lens)
        values = torch.repeat_interleave(values, repeats=self.num_heads, dim=0)  # (B*H, Tk, dv)
        output = torch.bmm(self.dropout(self.attention_weights), values)
        output_concat = transpose_output(output, self.num_heads)  # (B, Tq, H*dv)
        weights = self.attention_weights.reshape(batch_size, self.num_heads, *scores.shape[1:])
        return self.W_o(output_concat), weights
