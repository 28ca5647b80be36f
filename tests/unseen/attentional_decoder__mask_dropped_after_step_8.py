"""Memory_mask dropped from the 9th target step on.
BUG: memory_mask dropped from the 9th target step on."""
import torch
from torch import nn


def _msoftmax(s, allowed):
    if allowed is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.Hd = hidden_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _step(self, y_t, memory, keys, memory_mask, state):
        B = y_t.shape[0]
        if state is None:
            z = torch.zeros(B, self.Hd, dtype=y_t.dtype, device=y_t.device)
            h, c, o = z, z, z
        else:
            h, c, o = state
        h, c = self.cell(torch.cat([y_t, o], dim=-1), (h, c))
        scores = torch.einsum("bh,bsh->bs", h, keys)
        w = _msoftmax(scores, memory_mask)
        ctx = torch.einsum("bs,bsm->bm", w, memory)
        o = self.dropout(torch.tanh(self.W_c(torch.cat([h, ctx], dim=-1))))
        return o, w, (h, c, o)

    def step(self, y_t, memory, memory_mask=None, state=None):
        return self._step(y_t, memory, self.W_a(memory), memory_mask, state)

    def forward(self, targets, memory, memory_mask=None, state=None):
        keys = self.W_a(memory)
        outs, ws = [], []
        for t in range(targets.shape[1]):
            o, w, state = self._step(targets[:, t], memory, keys, memory_mask if t < 8 else None, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
