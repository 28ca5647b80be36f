"""STYLE: CS224n NMT assignment (a4 nmt_model.py step()): Ybar_t/enc_hiddens_proj names, torch.bmm, masked_fill then zeroing, forward loops over step()
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
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(p=dropout)

    def _zero_state(self, y_t):
        batch_size = y_t.size(0)
        h0 = y_t.new_zeros(batch_size, self.hidden_dim)
        c0 = y_t.new_zeros(batch_size, self.hidden_dim)
        o0 = y_t.new_zeros(batch_size, self.hidden_dim)
        return h0, c0, o0

    def step(self, y_t, memory, memory_mask=None, state=None):
        if state is None:
            state = self._zero_state(y_t)
        dec_hidden, dec_cell, o_prev = state

        # input feeding: embedding first, then the previous attentional state
        Ybar_t = torch.cat([y_t, o_prev], dim=1)                      # (B, E + Hd)
        dec_hidden, dec_cell = self.cell(Ybar_t, (dec_hidden, dec_cell))

        enc_hiddens_proj = self.W_a(memory)                           # (B, S, Hd)
        e_t = torch.bmm(enc_hiddens_proj, dec_hidden.unsqueeze(2)).squeeze(2)  # (B, S)

        if memory_mask is not None:
            # CS224n fills the padding with -inf; a finite minimum keeps empty rows NaN-free
            e_t = e_t.masked_fill(~memory_mask, torch.finfo(e_t.dtype).min)
        alpha_t = F.softmax(e_t, dim=1)
        if memory_mask is not None:
            alpha_t = alpha_t.masked_fill(~memory_mask, 0.0)          # empty rows -> all zeros

        a_t = torch.bmm(alpha_t.unsqueeze(1), memory).squeeze(1)      # (B, M)
        U_t = torch.cat([dec_hidden, a_t], dim=1)                     # (B, Hd + M)
        V_t = self.W_c(U_t)
        O_t = self.dropout(torch.tanh(V_t))

        return O_t, alpha_t, (dec_hidden, dec_cell, O_t)

    def forward(self, targets, memory, memory_mask=None, state=None):
        combined_outputs = []
        all_weights = []
        for Y_t in torch.split(targets, 1, dim=1):
            Y_t = Y_t.squeeze(1)
            o_t, alpha_t, state = self.step(Y_t, memory, memory_mask, state)
            combined_outputs.append(o_t)
            all_weights.append(alpha_t)
        return torch.stack(combined_outputs, dim=1), torch.stack(all_weights, dim=1), state
