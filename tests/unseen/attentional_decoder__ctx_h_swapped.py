"""BUG: W_c applied to [ctx_t ; h_t] (OpenNMT's linear_out order) instead of [h_t ; ctx_t]; differs on every input (the columns of W_c meet the wrong halves).
STAGE: the output (o_t)
STYLE: OpenNMT-py GlobalAttention (concat_c = torch.cat([c, source], 2); linear_out) inside a loop
"""
import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.hidden_size = hidden_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def step(self, y_t, memory, memory_mask=None, state=None):
        if state is None:
            z = y_t.new_zeros(y_t.size(0), self.hidden_size)
            state = (z, z, z)
        hidden, cell_state, input_feed = state
        hidden, cell_state = self.cell(torch.cat((y_t, input_feed), 1), (hidden, cell_state))
        attn_energies = torch.bmm(self.W_a(memory), hidden.unsqueeze(2)).squeeze(2)
        if memory_mask is not None:
            attn_energies = attn_energies.masked_fill(~memory_mask, float('-inf'))
            live = memory_mask.any(1, keepdim=True)
            attn_energies = attn_energies.masked_fill(~live, 0.0)
            attn_weights = torch.softmax(attn_energies, dim=1).masked_fill(~live, 0.0)
        else:
            attn_weights = torch.softmax(attn_energies, dim=1)
        context = torch.bmm(attn_weights.unsqueeze(1), memory).squeeze(1)
        o = self.dropout(torch.tanh(self.W_c(torch.cat((context, hidden), 1))))
        return o, attn_weights, (hidden, cell_state, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        outs, ws = [], []
        for t in range(targets.size(1)):
            o, w, state = self.step(targets[:, t], memory, memory_mask, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
