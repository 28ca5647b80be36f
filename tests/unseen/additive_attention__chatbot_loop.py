"""BUG: none
STYLE: PyTorch chatbot tutorial Attn ("concat"-like energy via expand, torch.sum(self.v * energy, dim=2), one query at a time in a Python loop, attn_energies.t()), with a length mask.
"""
import torch
import torch.nn.functional as F
from torch import nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super(AdditiveAttention, self).__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def score(self, hidden, encoder_output):
        # hidden: (B, h) projected query; encoder_output: (Tk, B, h) projected keys
        energy = torch.tanh(hidden.unsqueeze(0).expand(encoder_output.size(0), -1, -1) + encoder_output)
        return torch.sum(self.w_v.weight[0] * energy, dim=2)        # (Tk, B)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        encoder_outputs = self.W_k(keys).transpose(0, 1)            # (Tk, B, h)
        q = self.W_q(queries)
        rows = []
        for i in range(Tq):
            attn_energies = self.score(q[:, i], encoder_outputs)     # (Tk, B)
            rows.append(attn_energies.t())                           # (B, Tk)
        attn_energies = torch.stack(rows, dim=1)                     # (B, Tq, Tk)
        if valid_lens is None:
            weights = F.softmax(attn_energies, dim=-1)
        else:
            lens = valid_lens.view(B, 1) if valid_lens.dim() == 1 else valid_lens
            mask = torch.arange(Tk, device=keys.device)[None, None, :] < lens[:, :, None]
            mask = mask.expand(B, Tq, Tk)
            filled = attn_energies.masked_fill(~mask, torch.finfo(attn_energies.dtype).min)
            weights = F.softmax(filled, dim=-1).masked_fill(~mask, 0.0)
        context = torch.bmm(self.dropout(weights), values)
        return context, weights
