"""STYLE: TensorFlow "NMT with attention" tutorial BahdanauAttention layer (W1, W2, V, softmax(axis=1)) ported to torch
BUG: The softmax keeps the tutorial's axis=1, which here is the query axis, so weights are normalised over queries instead of over keys.
STAGE: weights
WHEN: Always (every input; with Tq == 1 every unmasked weight becomes 1).
"""
import torch
from torch import nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)  # W1
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)  # W2
        self.w_v = nn.Linear(attn_dim, 1, bias=False)  # V
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        # query_with_time_axis: (B, Tq, 1, h); keys with a query axis: (B, 1, Tk, h)
        query_with_time_axis = self.W_q(queries).unsqueeze(2)
        keys_with_query_axis = self.W_k(keys).unsqueeze(1)
        # score shape == (B, Tq, Tk, 1): we get 1 at the last axis because we apply V
        score = self.w_v(torch.tanh(query_with_time_axis + keys_with_query_axis))
        score = score.squeeze(-1)
        mask = None
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            mask = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
            score = score.masked_fill(~mask, torch.finfo(score.dtype).min)
        # attention_weights shape == (B, Tq, Tk)
        attention_weights = torch.softmax(score, dim=1)
        if mask is not None:
            attention_weights = attention_weights * mask
        # context_vector shape after sum == (B, Tq, dv)
        context_vector = torch.bmm(self.dropout(attention_weights), values)
        return context_vector, attention_weights
