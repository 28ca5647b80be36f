"""BUG: none
STYLE: OpenNMT-py InputFeedRNNDecoder + GlobalAttention("general"): input feeding of the previous attentional state, memory bank projected once per forward, masked softmax via masked_fill, linear_out on the concatenation, tanh, dropout.
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

    def _init_state(self, ref, batch):
        z = ref.new_zeros(batch, self.hidden_dim)
        return z, z, z

    def _score_and_attend(self, h_t, memory, memory_proj, memory_mask):
        align = torch.bmm(memory_proj, h_t.unsqueeze(2)).squeeze(2)          # (B, S)
        if memory_mask is not None:
            live = memory_mask.any(dim=1, keepdim=True)
            align = align.masked_fill(~memory_mask, float("-inf")).masked_fill(~live, 0.0)
            align_vectors = torch.softmax(align, dim=-1).masked_fill(~live, 0.0)
        else:
            align_vectors = torch.softmax(align, dim=-1)
        c = torch.bmm(align_vectors.unsqueeze(1), memory).squeeze(1)          # (B, M)
        return c, align_vectors

    def _step(self, y_t, memory, memory_proj, memory_mask, state):
        if state is None:
            state = self._init_state(y_t, y_t.size(0))
        h, c, input_feed = state
        decoder_input = torch.cat([y_t, input_feed], dim=1)
        h, c = self.cell(decoder_input, (h, c))
        ctx, align = self._score_and_attend(h, memory, memory_proj, memory_mask)
        attn_h = torch.tanh(self.W_c(torch.cat([h, ctx], dim=1)))
        attn_h = self.dropout(attn_h)
        return attn_h, align, (h, c, attn_h)

    def step(self, y_t, memory, memory_mask=None, state=None):
        return self._step(y_t, memory, self.W_a(memory), memory_mask, state)

    def forward(self, targets, memory, memory_mask=None, state=None):
        memory_proj = self.W_a(memory)
        outs, attns = [], []
        for t in range(targets.size(1)):
            o, a, state = self._step(targets[:, t], memory, memory_proj, memory_mask, state)
            outs.append(o)
            attns.append(a)
        return torch.stack(outs, dim=1), torch.stack(attns, dim=1), state
