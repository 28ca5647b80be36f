"""BUG: dropout applied only to the returned o_t; the state keeps the undropped o_t, so the next step is fed a different o. Differs in train() with dropout > 0 (from step 2 on, and the returned state o).
STAGE: the state (o kept for input feeding)
STYLE: PyTorch seq2seq tutorial loop with Luong input feeding bolted on; dropout treated as an output-layer op
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
        o = torch.tanh(self.W_c(torch.cat((hidden, context), 1)))
        return self.dropout(o), attn_weights, (hidden, cell_state, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        outs, ws = [], []
        for t in range(targets.size(1)):
            o, w, state = self.step(targets[:, t], memory, memory_mask, state)
            outs.append(o)
            ws.append(w)
        return torch.stack(outs, 1), torch.stack(ws, 1), state
