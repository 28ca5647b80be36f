"""BUG: LSTM cell input concatenated as [o_{t-1}; y_t] (contract: embedding first)
STAGE: the catalogue's input_order
"""
import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _attend(self, h, keys, memory, memory_mask):
        # keys = W_a(memory): (B, S, Hd)
        scores = torch.bmm(keys, h.unsqueeze(2)).squeeze(2)          # (B, S)
        if memory_mask is not None:
            scores = scores.masked_fill(~memory_mask, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1) * memory_mask
        else:
            weights = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)       # (B, M)
        return weights, ctx

    def _step(self, y_t, keys, memory, memory_mask, state):
        if state is None:
            z = y_t.new_zeros(y_t.shape[0], self.hidden_dim)
            state = (z, z, z)
        h, c, o = state
        h, c = self.cell(torch.cat([o, y_t], dim=-1), (h, c))
        weights, ctx = self._attend(h, keys, memory, memory_mask)
        o = self.dropout(torch.tanh(self.W_c(torch.cat([h, ctx], dim=-1))))
        return o, weights, (h, c, o)

    def step(self, y_t, memory, memory_mask=None, state=None):
        return self._step(y_t, self.W_a(memory), memory, memory_mask, state)

    def forward(self, targets, memory, memory_mask=None, state=None):
        keys = self.W_a(memory)
        outs, ws = [], []
        for t in range(targets.shape[1]):
            o, w, state = self._step(targets[:, t], keys, memory, memory_mask, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
