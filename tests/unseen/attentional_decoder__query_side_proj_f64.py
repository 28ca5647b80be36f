"""BUG: none
STYLE: scores as (h @ W_a.weight) . m, a float64 softmax, forward built from step
"""
import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    """Scores as (W_a^T h_t) . m_s, attention softmax in float64, forward = repeated step."""

    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.p = dropout

    def step(self, y_t, memory, memory_mask=None, state=None):
        B = y_t.shape[0]
        if state is None:
            zeros = y_t.new_zeros(B, self.cell.hidden_size)
            state = (zeros, zeros, zeros)
        h, c, o = state
        h, c = self.cell(torch.cat([y_t, o], dim=-1), (h, c))
        q = h @ self.W_a.weight                                   # (B, M)
        scores = torch.einsum("bm,bsm->bs", q, memory).double()
        if memory_mask is not None:
            scores = scores.masked_fill(~memory_mask, float("-inf"))
            top = scores.max(dim=-1, keepdim=True).values
            top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
            ex = torch.exp(scores - top.detach())
            den = ex.sum(-1, keepdim=True)
            w = ex / torch.where(den > 0, den, torch.ones_like(den))
        else:
            w = torch.softmax(scores, dim=-1)
        w = w.to(memory.dtype)
        ctx = torch.einsum("bs,bsm->bm", w, memory)
        o = torch.tanh(self.W_c(torch.cat([h, ctx], dim=-1)))
        o = nn.functional.dropout(o, self.p, self.training)
        return o, w, (h, c, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        outs, ws = [], []
        for t in range(targets.shape[1]):
            o, w, state = self.step(targets[:, t], memory, memory_mask, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
