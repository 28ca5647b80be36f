"""BUG: none
STYLE: raw-matmul style: the nn.Linear weights are read as (H, h, d_in) tensors and contracted with einsum; a hand-written stable softmax (-inf fill, max over valid keys, exp, divide by a guarded sum); F.dropout on the weights.
"""
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.p = dropout
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim).normal_(0.0, attn_dim ** -0.5))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        H, h = self.num_heads, self.attn_dim
        B, Tq, dq = queries.shape
        Tk = keys.shape[1]
        Wq = self.W_q.weight.view(H, h, -1)
        Wk = self.W_k.weight.view(H, h, -1)
        qp = torch.einsum("bqd,nhd->bnqh", queries, Wq)
        kp = torch.einsum("bkd,nhd->bnkh", keys, Wk)
        scores = (torch.tanh(qp[:, :, :, None, :] + kp[:, :, None, :, :]) * self.w_v[None, :, None, None, :]).sum(-1)

        if valid_lens is None:
            valid = torch.ones(1, 1, 1, Tk, dtype=torch.bool, device=scores.device)
        else:
            lens = valid_lens.to(scores.device)
            lens = lens.view(B, 1, 1, 1) if lens.dim() == 1 else lens.view(B, 1, Tq, 1)
            valid = torch.arange(Tk, device=scores.device).view(1, 1, 1, Tk) < lens
        masked = scores.masked_fill(~valid, float("-inf"))
        row_max = masked.amax(dim=-1, keepdim=True).detach()
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        e = torch.exp(masked - row_max)
        denom = e.sum(dim=-1, keepdim=True)
        weights = e / torch.where(denom > 0, denom, torch.ones_like(denom))

        dropped = F.dropout(weights, p=self.p, training=self.training)
        ctx = torch.einsum("bnqk,bkv->bqnv", dropped, values).flatten(2)
        return self.W_o(ctx), weights
