"""The module's own masking is wrong (lengths off by one) while it never calls masked_softmax: a correct
masked_softmax must not be blamed."""
import torch
from torch import nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = self.w_v(torch.tanh(self.W_q(queries)[:, :, None] + self.W_k(keys)[:, None])).squeeze(-1)
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
            keep = torch.arange(scores.shape[-1]) <= lens[..., None]
            scores = scores.masked_fill(~keep, -1e9)
            weights = torch.softmax(scores, -1) * keep
        else:
            weights = torch.softmax(scores, -1)
        return self.dropout(weights) @ values, weights
