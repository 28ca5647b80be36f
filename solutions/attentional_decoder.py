"""Reference: Luong's attentional decoder with input feeding (general score, the attentional state fed forward)."""
import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    """An LSTM cell fed [y_t ; o_{t-1}], general attention over the memory, o_t = dropout(tanh(W_c [h_t ; ctx_t]))."""

    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.hidden_dim = hidden_dim

    def step(self, y_t, memory, memory_mask=None, state=None):
        """y_t (B, E), memory (B, S, M), memory_mask None or (B, S) -> o_t (B, Hd), weights_t (B, S), (h, c, o)."""
        if state is None:
            zeros = y_t.new_zeros(y_t.shape[0], self.hidden_dim)
            state = (zeros, zeros, zeros)
        h, c, o = state
        h, c = self.cell(torch.cat((y_t, o), dim=-1), (h, c))  # input feeding: [y_t ; o_{t-1}], embedding first
        keys = self.W_a(memory)  # (B, S, Hd): W_a m_s
        scores = (keys @ h[:, :, None])[:, :, 0]  # (B, S): h_t . (W_a m_s)
        if memory_mask is None:
            weights = torch.softmax(scores, dim=-1)
        else:
            filled = scores.masked_fill(~memory_mask, torch.finfo(scores.dtype).min)
            weights = torch.softmax(filled, dim=-1) * memory_mask  # a row with no source token: all zeros
        ctx = (weights[:, None, :] @ memory)[:, 0]  # (B, M): ctx_t = weights_t @ memory
        o = self.dropout(torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1))))  # [h_t ; ctx_t], the state first
        return o, weights, (h, c, o)

    def forward(self, targets, memory, memory_mask=None, state=None):
        """targets (B, T, E) -> outputs (B, T, Hd), weights (B, T, S), the state after the last step."""
        outputs, weights = [], []
        for t in range(targets.shape[1]):  # teacher forcing: exactly step at each position, from `state`
            o_t, w_t, state = self.step(targets[:, t], memory, memory_mask, state)
            outputs.append(o_t)
            weights.append(w_t)
        return torch.stack(outputs, dim=1), torch.stack(weights, dim=1), state
