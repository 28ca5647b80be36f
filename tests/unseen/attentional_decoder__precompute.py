"""BUG: none
STYLE: CORRECT (OpenNMT-style: forward inlines the recurrence, W_a(memory) computed once, masking with torch.where and -inf plus a guard for fully-masked rows, einsum)
"""
import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.hidden_dim = hidden_dim
        self.memory_dim = memory_dim
        self.cell = nn.LSTMCell(embed_dim + hidden_dim, hidden_dim)
        self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)
        self.W_c = nn.Linear(hidden_dim + memory_dim, hidden_dim, bias=False)
        self.drop = nn.Dropout(p=dropout)

    @staticmethod
    def _masked_softmax(scores, mask):
        if mask is None:
            return torch.softmax(scores, dim=-1)
        has_any = mask.any(dim=-1, keepdim=True)
        keep = mask | ~has_any                    # fully-masked rows: compute a dummy softmax
        s = torch.where(keep, scores, torch.full_like(scores, float("-inf")))
        p = torch.softmax(s, dim=-1)
        return torch.where(mask, p, torch.zeros_like(p))

    def step(self, y_t, memory, memory_mask=None, state=None):
        outputs, weights, state = self.forward(y_t.unsqueeze(1), memory, memory_mask, state)
        return outputs[:, 0], weights[:, 0], state

    def forward(self, targets, memory, memory_mask=None, state=None):
        B, T, _ = targets.shape
        if state is None:
            h = targets.new_zeros(B, self.hidden_dim)
            c = targets.new_zeros(B, self.hidden_dim)
            o = targets.new_zeros(B, self.hidden_dim)
        else:
            h, c, o = state
        keys = self.W_a(memory)                                   # (B, S, Hd)
        outputs = []
        alphas = []
        for t in range(T):
            x = torch.cat((targets[:, t, :], o), dim=1)
            h, c = self.cell(x, (h, c))
            scores = torch.einsum("bsh,bh->bs", keys, h)
            alpha = self._masked_softmax(scores, memory_mask)
            ctx = torch.einsum("bs,bsm->bm", alpha, memory)
            o = self.drop(torch.tanh(self.W_c(torch.cat((h, ctx), dim=1))))
            outputs.append(o)
            alphas.append(alpha)
        return torch.stack(outputs, dim=1), torch.stack(alphas, dim=1), (h, c, o)
