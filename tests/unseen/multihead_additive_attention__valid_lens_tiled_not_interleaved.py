"""BUG: valid_lens is tiled with .repeat (b0, b1, ..., b0, b1, ...) instead of repeat_interleave, so with heads folded into the batch as b * H + n, head n of batch row b gets another row's lengths.
STAGE: the mask
"""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax


def transpose_qkv(X, num_heads):
    """Transposition for parallel computation of multiple attention heads."""
    # Shape of input `X`: (`batch_size`, no. of queries or key-value pairs,
    # `num_heads` * `attn_dim`). Shape of output `X`: (`batch_size`, no. of
    # queries or key-value pairs, `num_heads`, `attn_dim`)
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    # Shape of output: (`batch_size` * `num_heads`, no. of queries or
    # key-value pairs, `attn_dim`)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """Reverse the operation of `transpose_qkv`."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)
        bound = 1.0 / math.sqrt(attn_dim)
        nn.init.uniform_(self.w_v, -bound, bound)

    def forward(self, queries, keys, values, valid_lens=None):
        batch_size, num_queries, num_keys = queries.shape[0], queries.shape[1], keys.shape[1]
        # (B * H, Tq, h) and (B * H, Tk, h); row b * H + n is head n of batch row b
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))   # (B * H, Tq, Tk, h)
        w_v = self.w_v.repeat(batch_size, 1)                              # (B * H, h): row b * H + n = w_v[n]
        scores = (features * w_v[:, None, None, :]).sum(dim=-1)
        if valid_lens is not None:
            # On axis 0, copy the first item (scalar or vector) for `num_heads`
            # times, then copy the next item, and so on
            valid_lens = valid_lens.repeat(self.num_heads, 1) if valid_lens.dim() == 2 else valid_lens.repeat(self.num_heads)
        attention_weights = masked_softmax(scores, valid_lens)           # (B * H, Tq, Tk)
        values = torch.repeat_interleave(values, repeats=self.num_heads, dim=0)
        output = torch.bmm(self.dropout(attention_weights), values)       # (B * H, Tq, dv)
        output_concat = transpose_output(output, self.num_heads)          # (B, Tq, H * dv)
        weights = attention_weights.reshape(batch_size, self.num_heads, num_queries, num_keys)
        return self.W_o(output_concat), weights
