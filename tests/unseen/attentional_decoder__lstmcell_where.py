"""STYLE: plain nn.LSTMCell driver (tutorial style): W_a applied to the memory once per forward, torch.where masking, W_c split into its two column blocks instead of a concat
BUG: none
STAGE: none
"""
import torch
from torch import nn
import torch.nn.functional as F


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.hidden_dim = hidden_dim
        self.memory_dim = memory_dim
        self.p = dropout
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)

    def _one_step(self, y_t, memory, keys, mask, state):
        h, c, o = state
        h, c = self.cell(torch.cat((y_t, o), dim=-1), (h, c))
        scores = torch.matmul(keys, h.unsqueeze(-1)).squeeze(-1)            # (B, S)
        if mask is not None:
            neg = torch.full_like(scores, torch.finfo(scores.dtype).min)
            scores = torch.where(mask, scores, neg)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = torch.where(mask, weights, torch.zeros_like(weights))
        ctx = torch.matmul(weights.unsqueeze(-2), memory).squeeze(-2)       # (B, M)
        Wc = self.W_c.weight
        pre = F.linear(h, Wc[:, : self.hidden_dim]) + F.linear(ctx, Wc[:, self.hidden_dim:])
        o = F.dropout(torch.tanh(pre), self.p, self.training)
        return o, weights, (h, c, o)

    def _init(self, y_t, state):
        if state is not None:
            return tuple(state)
        B = y_t.shape[0]
        return tuple(y_t.new_zeros((B, self.hidden_dim)) for _ in range(3))

    def step(self, y_t, memory, memory_mask=None, state=None):
        keys = self.W_a(memory)
        return self._one_step(y_t, memory, keys, memory_mask, self._init(y_t, state))

    def forward(self, targets, memory, memory_mask=None, state=None):
        keys = self.W_a(memory)          # once per forward
        state = self._init(targets[:, 0], state)
        outputs, weights = [], []
        for t in range(targets.shape[1]):
            o, w, state = self._one_step(targets[:, t], memory, keys, memory_mask, state)
            outputs.append(o)
            weights.append(w)
        return torch.stack(outputs, dim=1), torch.stack(weights, dim=1), state
