"""BUG: F.dropout called without training=self.training, so dropout also acts in eval() W_c split into two matmuls via its weight columns, hand-written stable softmax)
STAGE: the catalogue's dropout_in_eval
"""
import torch
import torch.nn.functional as F
from torch import nn


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.Hd = hidden_dim
        self.p = float(dropout)
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)

    def step(self, y_t, memory, memory_mask=None, state=None):
        B = y_t.shape[0]
        if state is None:
            h_prev = c_prev = o_prev = torch.zeros(B, self.Hd, dtype=y_t.dtype, device=y_t.device)
        else:
            h_prev, c_prev, o_prev = state
        h, c = self.cell(torch.cat([y_t, o_prev], -1), (h_prev, c_prev))
        scores = (self.W_a(memory) * h[:, None, :]).sum(-1)               # (B, S)
        if memory_mask is None:
            mask = torch.ones_like(scores, dtype=torch.bool)
        else:
            mask = memory_mask
        m = scores.masked_fill(~mask, float("-inf")).max(-1, keepdim=True).values
        m = m.masked_fill(~torch.isfinite(m), 0.0)
        e = torch.exp((scores - m).masked_fill(~mask, 0.0)) * mask
        den = e.sum(-1, keepdim=True)
        weights = e / den.masked_fill(den == 0, 1.0)
        ctx = (weights[:, :, None] * memory).sum(1)                       # (B, M)
        Wh, Wctx = self.W_c.weight[:, :self.Hd], self.W_c.weight[:, self.Hd:]
        o = torch.tanh(h @ Wh.T + ctx @ Wctx.T)
        o = F.dropout(o, p=self.p)
        return o, weights, (h, c, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        outs, ws = [], []
        for y_t in targets.unbind(1):
            o, w, state = self.step(y_t, memory, memory_mask, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
