"""STYLE: early seq2seq tutorial (softmax over all encoder steps, then multiply by the padding mask)
BUG: the padding mask is applied after a softmax over all keys and the weights are not renormalised, so rows with padding do not sum to 1.
STAGE: weights
WHEN: valid_lens given with at least one padded key in a row
"""
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
        Tk = keys.shape[1]
        q_proj = self.W_q(queries)  # (B, Tq, h)
        k_proj = self.W_k(keys)  # (B, Tk, h)
        energy = torch.tanh(q_proj.unsqueeze(2) + k_proj.unsqueeze(1))  # (B, Tq, Tk, h)
        scores = self.w_v(energy).squeeze(3)
        weights = torch.softmax(scores, dim=2)
        if valid_lens is not None:
            if valid_lens.dim() == 1:
                valid_lens = valid_lens.unsqueeze(1)
            pad_mask = torch.arange(Tk, device=keys.device).view(1, 1, Tk) < valid_lens.unsqueeze(2)
            weights = weights * pad_mask.to(weights.dtype)
        context = torch.bmm(self.dropout(weights), values)
        return context, weights
