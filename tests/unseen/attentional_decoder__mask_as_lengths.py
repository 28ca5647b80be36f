"""BUG: memory_mask converted to lengths (mask.sum) and used as a prefix mask j < len, d2l valid_lens style: wrong for masks that are not a prefix (left padding, holes)
STAGE: the mask (a prefix of lengths instead of the mask itself)
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
            lens = memory_mask.sum(-1, keepdim=True)
            prefix = torch.arange(scores.shape[-1], device=scores.device)[None, :] < lens
            scores = scores.masked_fill(~prefix, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1) * prefix
        else:
            weights = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)       # (B, M)
        return weights, ctx

    def _step(self, y_t, keys, memory, memory_mask, state):
        if state is None:
            z = y_t.new_zeros(y_t.shape[0], self.hidden_dim)
            state = (z, z, z)
        h, c, o = state
        h, c = self.cell(torch.cat([y_t, o], dim=-1), (h, c))
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
