"""The attentional decoder with the LSTM's gates written by hand from the cell's own parameters (PyTorch's gate order
i, f, g, o), the general score taken on the query side ((h W_a) . m) with einsum, and torch.where for the mask."""
import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.drop = nn.Dropout(dropout)

    def _lstm(self, x, h, c):
        gates = x @ self.cell.weight_ih.T + self.cell.bias_ih + h @ self.cell.weight_hh.T + self.cell.bias_hh
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    def step(self, y_t, memory, memory_mask=None, state=None):
        if state is None:
            z = y_t.new_zeros(y_t.shape[0], self.W_c.weight.shape[0])
            state = (z, z, z)
        h, c, o_prev = state
        h, c = self._lstm(torch.cat([y_t, o_prev], -1), h, c)
        scores = torch.einsum("bh,hm,bsm->bs", h, self.W_a.weight, memory)
        if memory_mask is not None:
            scores = torch.where(memory_mask, scores, torch.finfo(scores.dtype).min)
        a = torch.softmax(scores, -1)
        if memory_mask is not None:
            a = torch.where(memory_mask, a, torch.zeros((), dtype=a.dtype, device=a.device))
        ctx = torch.einsum("bs,bsm->bm", a, memory)
        o = self.drop(torch.tanh(self.W_c(torch.cat([h, ctx], -1))))
        return o, a, (h, c, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        outs, ws = [], []
        for y_t in targets.unbind(1):
            o, w, state = self.step(y_t, memory, memory_mask, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
