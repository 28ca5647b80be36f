"""BUG: returns the weights after dropout
STYLE: d2l.ai
"""
"""Additive attention in the style of many seq2seq tutorials: attn = dropout(softmax(scores)),
context = attn @ values, return context, attn.

BUG: the returned weights are the dropped ones; the contract returns them before dropout. Only
train() mode with dropout > 0 shows it.
"""
import torch
import torch.nn as nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, attn_dim, bias=False)
        self.w_v = nn.Linear(attn_dim, 1, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        e = self.w_v(torch.tanh(self.W_q(queries)[:, :, None] + self.W_k(keys)[:, None])).squeeze(-1)
        if valid_lens is not None:
            vl = valid_lens.view(B, 1) if valid_lens.dim() == 1 else valid_lens
            mask = torch.arange(Tk, device=e.device).view(1, 1, Tk) < vl.unsqueeze(-1)
        else:
            mask = torch.ones_like(e, dtype=torch.bool)
        mask = mask.expand_as(e)
        e = e.masked_fill(~mask, float("-inf"))
        m = e.amax(-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(e - m)
        z = p.sum(-1, keepdim=True)
        attn = p / torch.where(z > 0, z, torch.ones_like(z))
        attn = self.drop(attn)
        return torch.bmm(attn, values), attn
