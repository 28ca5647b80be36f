"""BUG: W_c applied to [ctx; h] instead of [h; ctx]
STYLE: manual LSTM gates
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionalDecoder(nn.Module):
    """Gate arithmetic written out from the LSTMCell's own parameters (i, f, g, o order),
    preallocated output buffers in forward."""

    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.Hd = hidden_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.drop = nn.Dropout(dropout)

    def _lstm(self, inp, h, c):
        gates = (F.linear(inp, self.cell.weight_ih, self.cell.bias_ih)
                 + F.linear(h, self.cell.weight_hh, self.cell.bias_hh))
        i, f, g, o = gates.chunk(4, dim=-1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c_new), c_new

    def _attend(self, h, mem_proj, memory, memory_mask):
        e = (mem_proj * h.unsqueeze(1)).sum(-1)                        # (B, S)
        if memory_mask is None:
            return torch.softmax(e, -1)
        e = torch.where(memory_mask, e, torch.full_like(e, -math.inf))
        m = e.amax(-1, keepdim=True).nan_to_num(neginf=0.0).detach()
        ex = torch.exp(e - m)
        return ex / ex.sum(-1, keepdim=True).clamp_min(torch.finfo(ex.dtype).tiny)

    def _one(self, y_t, memory, mem_proj, memory_mask, state):
        if state is None:
            z = y_t.new_zeros(y_t.size(0), self.Hd)
            state = (z, z, z)
        h, c, o_prev = state
        h, c = self._lstm(torch.cat([y_t, o_prev], -1), h, c)
        w = self._attend(h, mem_proj, memory, memory_mask)
        ctx = torch.bmm(w.unsqueeze(1), memory).squeeze(1)
        o = self.drop(torch.tanh(self.W_c(torch.cat([ctx, h], -1))))
        return o, w, (h, c, o)

    def step(self, y_t, memory, memory_mask=None, state=None):
        return self._one(y_t, memory, self.W_a(memory), memory_mask, state)

    def forward(self, targets, memory, memory_mask=None, state=None):
        B, T, _ = targets.shape
        S = memory.size(1)
        mem_proj = self.W_a(memory)
        outputs = targets.new_empty(B, T, self.Hd)
        weights = targets.new_empty(B, T, S)
        for t in range(T):
            o, w, state = self._one(targets[:, t], memory, mem_proj, memory_mask, state)
            outputs[:, t] = o
            weights[:, t] = w
        return outputs, weights, state
