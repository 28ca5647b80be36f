"""BUG: none
STYLE: fairseq/OpenNMT flavour: keys are moved to time-first layout (Tk, B, h), energies are built as (Tk, B, Tq) and transposed back to batch-first before the masked softmax.
"""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.attn_dim = attn_dim
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        # T x B x C layout for the source side
        key_proj = self.W_k(keys).transpose(0, 1)             # Tk x B x h
        query_proj = self.W_q(queries)                        # B x Tq x h
        # Tk x B x Tq x h
        energy = torch.tanh(key_proj.unsqueeze(2) + query_proj.unsqueeze(0))
        attn_scores = self.w_v(energy).squeeze(3)             # Tk x B x Tq
        attn_scores = attn_scores.permute(1, 2, 0)            # B x Tq x Tk
        attn_probs = masked_softmax(attn_scores, valid_lens)
        out = torch.matmul(self.dropout_module(attn_probs), values)
        return out, attn_probs
