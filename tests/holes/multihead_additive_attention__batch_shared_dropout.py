"""Reference: multi-head additive attention."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    """H additive scorers over the same values; contexts concatenated in head order, then W_o."""

    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim).uniform_(-attn_dim**-0.5, attn_dim**-0.5))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.p = dropout

    def forward(self, queries, keys, values, valid_lens=None):
        (B, Tq, _), Tk, H = queries.shape, keys.shape[1], self.num_heads
        q = self.W_q(queries).view(B, Tq, H, self.attn_dim).transpose(1, 2)  # (B, H, Tq, h)
        k = self.W_k(keys).view(B, Tk, H, self.attn_dim).transpose(1, 2)  # (B, H, Tk, h)
        features = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))  # (B, H, Tq, Tk, h)
        scores = (features * self.w_v[None, :, None, None, :]).sum(-1)  # (B, H, Tq, Tk)
        lens = None if valid_lens is None else valid_lens.repeat_interleave(H, dim=0)  # (B*H, ...)
        weights = masked_softmax(scores.reshape(B * H, Tq, Tk), lens).view(B, H, Tq, Tk)
        dropped = weights
        if self.training and self.p > 0:  # one mask per (head, query, key), drawn for the batch
            keep = torch.rand(weights.shape[1:], device=weights.device) >= self.p
            dropped = weights * keep / (1 - self.p)
        context = dropped @ values.unsqueeze(1)  # (B, H, Tq, dv)
        return self.W_o(context.transpose(1, 2).reshape(B, Tq, -1)), weights
