"""BUG: none
STYLE: "LSTM from scratch" tutorials: gates computed by hand from cell.weight_ih / weight_hh (i, f, g, o chunk order), general score grouped on the query side (h W_a) . m_s via einsum, the mask as an additive float bias, recurrence written as a Python loop in forward.
"""
import torch
from torch import nn
import torch.nn.functional as F


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.E, self.Hd, self.M = embed_dim, hidden_dim, memory_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.drop = nn.Dropout(dropout)

    def _lstm(self, x, h, c):
        gates = F.linear(x, self.cell.weight_ih, self.cell.bias_ih) + F.linear(h, self.cell.weight_hh, self.cell.bias_hh)
        i, f, g, o = gates.chunk(4, dim=1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        return h_new, c_new

    def step(self, y_t, memory, memory_mask=None, state=None):
        B = y_t.shape[0]
        if state is None:
            h = c = o = torch.zeros(B, self.Hd, dtype=y_t.dtype, device=y_t.device)
        else:
            h, c, o = state
        h, c = self._lstm(torch.cat([y_t, o], dim=-1), h, c)
        q = h @ self.W_a.weight                                          # (B, M): W_a^T h
        scores = torch.einsum('bm,bsm->bs', q, memory)
        if memory_mask is not None:
            bias = torch.zeros_like(scores).masked_fill(~memory_mask, torch.finfo(scores.dtype).min)
            w = torch.softmax(scores + bias, dim=-1) * memory_mask.any(-1, keepdim=True)
        else:
            w = torch.softmax(scores, dim=-1)
        ctx = torch.einsum('bs,bsm->bm', w, memory)
        o = self.drop(torch.tanh(self.W_c(torch.cat([h, ctx], dim=-1))))
        return o, w, (h, c, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        outputs, weights = [], []
        for t in range(targets.shape[1]):
            o, w, state = self.step(targets[:, t], memory, memory_mask, state)
            outputs.append(o)
            weights.append(w)
        return torch.stack(outputs, 1), torch.stack(weights, 1), state
