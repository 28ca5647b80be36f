"""BUG: resets o_prev to 0 even when a state is given
STYLE: CS224n NMT
"""
"""Luong decoder with input feeding, after CS224n's NMT assignment (nmt_model.py decode/step)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.hidden_size = hidden_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)      # att_projection
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)  # combined_output_projection
        self.dropout = nn.Dropout(p=dropout)

    def _init_state(self, memory, state):
        B = memory.size(0)
        o_prev = memory.new_zeros(B, self.hidden_size)   # o_0 = 0, as in CS224n's decode()
        if state is not None:
            return state[0], state[1], o_prev
        return (o_prev, o_prev, o_prev)

    def _step(self, Ybar_t, dec_state, enc_hiddens, enc_hiddens_proj, enc_masks):
        dec_state = self.cell(Ybar_t, dec_state)
        dec_hidden, dec_cell = dec_state
        e_t = torch.bmm(enc_hiddens_proj, dec_hidden.unsqueeze(2)).squeeze(2)
        if enc_masks is not None:
            # enc_masks here is True for real tokens (the inverse of CS224n's)
            e_t = e_t.masked_fill(~enc_masks, torch.finfo(e_t.dtype).min)
        alpha_t = F.softmax(e_t, dim=1)
        if enc_masks is not None:
            alpha_t = alpha_t * enc_masks
        a_t = torch.bmm(alpha_t.unsqueeze(1), enc_hiddens).squeeze(1)
        U_t = torch.cat((dec_hidden, a_t), dim=1)
        V_t = self.W_c(U_t)
        O_t = self.dropout(torch.tanh(V_t))
        return dec_state, O_t, alpha_t

    def step(self, y_t, memory, memory_mask=None, state=None):
        h, c, o_prev = self._init_state(memory, state)
        enc_hiddens_proj = self.W_a(memory)
        Ybar_t = torch.cat((y_t, o_prev), dim=1)
        (h, c), o_t, alpha_t = self._step(Ybar_t, (h, c), memory, enc_hiddens_proj, memory_mask)
        return o_t, alpha_t, (h, c, o_t)

    def forward(self, targets, memory, memory_mask=None, state=None):
        h, c, o_prev = self._init_state(memory, state)
        enc_hiddens_proj = self.W_a(memory)
        combined_outputs, alphas = [], []
        for Y_t in torch.split(targets, 1, dim=1):
            Y_t = Y_t.squeeze(1)
            Ybar_t = torch.cat((Y_t, o_prev), dim=1)
            (h, c), o_t, alpha_t = self._step(Ybar_t, (h, c), memory, enc_hiddens_proj, memory_mask)
            combined_outputs.append(o_t)
            alphas.append(alpha_t)
            o_prev = o_t
        return torch.stack(combined_outputs, dim=1), torch.stack(alphas, dim=1), (h, c, o_prev)
