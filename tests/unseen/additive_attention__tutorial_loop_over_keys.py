"""BUG: none
STYLE: PyTorch seq2seq-tutorial flavour: an explicit Python loop over encoder positions builds the energies one key at a time (memory O(B*Tq*h) instead of O(B*Tq*Tk*h)), then stack, softmax, bmm.
"""
import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super(AdditiveAttention, self).__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.attn_dropout = nn.Dropout(p=dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        proj_q = self.W_q(queries)                      # (B, Tq, h)
        proj_k = self.W_k(keys)                         # (B, Tk, h)
        energies = []
        for j in range(keys.size(1)):
            energy = self.w_v(torch.tanh(proj_q + proj_k[:, j:j + 1, :]))   # (B, Tq, 1)
            energies.append(energy)
        scores = torch.cat(energies, dim=2)              # (B, Tq, Tk)
        attn_weights = masked_softmax(scores, valid_lens)
        context = self.attn_dropout(attn_weights).bmm(values)
        return context, attn_weights
