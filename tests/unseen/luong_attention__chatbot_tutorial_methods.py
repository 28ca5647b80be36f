"""BUG: none
STYLE: PyTorch chatbot-tutorial style (Luong "Attn" module with dot_score / general_score / concat_score methods); concat builds every [q_i ; k_j] pair explicitly with expand + cat.
"""
import math

import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        super(LuongAttention, self).__init__()
        self.method = score
        if self.method not in ['dot', 'scaled_dot', 'general', 'concat']:
            raise ValueError(self.method, "is not an appropriate attention method: "
                             "choose one of 'dot', 'scaled_dot', 'general', 'concat'.")
        self.query_dim = query_dim
        self.key_dim = key_dim
        if self.method in ('dot', 'scaled_dot') and query_dim != key_dim:
            raise ValueError(f"{score} attention needs query_dim == key_dim, got {query_dim} and {key_dim}")
        if self.method == 'general':
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        elif self.method == 'concat':
            if attn_dim is None:
                raise ValueError("concat attention needs attn_dim")
            self.W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False)
            self.v_a = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def dot_score(self, queries, keys):
        return torch.bmm(queries, keys.transpose(1, 2))

    def scaled_dot_score(self, queries, keys):
        return torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(self.key_dim)

    def general_score(self, queries, keys):
        energy = self.W_a(keys)                          # (B, Tk, dq)
        return torch.bmm(queries, energy.transpose(1, 2))

    def concat_score(self, queries, keys):
        Tq, Tk = queries.size(1), keys.size(1)
        q = queries.unsqueeze(2).expand(-1, -1, Tk, -1)   # (B, Tq, Tk, dq)
        k = keys.unsqueeze(1).expand(-1, Tq, -1, -1)      # (B, Tq, Tk, dk)
        energy = self.W_a(torch.cat((q, k), dim=-1)).tanh()
        return self.v_a(energy).squeeze(-1)

    def forward(self, queries, keys, values, valid_lens=None):
        # Calculate the attention weights (energies) based on the given method
        if self.method == 'general':
            attn_energies = self.general_score(queries, keys)
        elif self.method == 'concat':
            attn_energies = self.concat_score(queries, keys)
        elif self.method == 'scaled_dot':
            attn_energies = self.scaled_dot_score(queries, keys)
        else:
            attn_energies = self.dot_score(queries, keys)
        weights = masked_softmax(attn_energies, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights
