"""Tk > 32: softmax per block of 32 keys, averaged over blocks (wrong normalisation).
BUG: Tk > 32: softmax per block of 32 keys, averaged over blocks (wrong normalisation)."""
"""Reference: additive (Bahdanau) attention."""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    """scores[b,i,j] = w_v . tanh(W_q q_i + W_k k_j); output = dropout(weights) @ values."""

    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        # (B, Tq, 1, h) + (B, 1, Tk, h) -> (B, Tq, Tk, h)
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)  # (B, Tq, Tk)
        if scores.shape[-1] > 32:  # long sources: normalise 32 keys at a time
            Tk = scores.shape[-1]
            vl = valid_lens if valid_lens is None or valid_lens.dim() == 2 else valid_lens[:, None].expand(-1, scores.shape[1])
            parts = [masked_softmax(scores[..., j:j + 32], None if vl is None else (vl - j).clamp(0, 32)) for j in range(0, Tk, 32)]
            weights = torch.cat(parts, -1) / len(parts)
        else:
            weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
