"""BUG: the projections are viewed as (B, T, h, H) and permuted, so head n reads the strided features n, n+H, n+2H, ... instead of the contiguous block n*h:(n+1)*h the contract assigns it.
STAGE: the head split
"""
import math

import torch
from torch import nn


def _masked_softmax(scores, valid_lens):
    # scores: (B, H, Tq, Tk); valid_lens: None, (B,) or (B, Tq)
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    B, _, Tq, Tk = scores.shape
    vl = valid_lens.to(scores.device)
    if vl.dim() == 1:
        vl = vl[:, None].expand(B, Tq)
    keep = torch.arange(Tk, device=scores.device)[None, None, :] < vl[:, :, None]  # (B, Tq, Tk)
    keep = keep[:, None]
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep, w, torch.zeros_like(w))


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim
        self.value_dim = value_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)
        nn.init.uniform_(self.w_v, -1.0 / math.sqrt(attn_dim), 1.0 / math.sqrt(attn_dim))

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        H, h = self.num_heads, self.attn_dim
        qh = self.W_q(queries).view(B, Tq, h, H).permute(0, 3, 1, 2)  # (B, H, Tq, h)
        kh = self.W_k(keys).view(B, Tk, h, H).permute(0, 3, 1, 2)  # (B, H, Tk, h)
        features = torch.tanh(qh.unsqueeze(3) + kh.unsqueeze(2))  # (B, H, Tq, Tk, h)
        scores = torch.einsum("bnqkh,nh->bnqk", features, self.w_v)
        weights = _masked_softmax(scores, valid_lens)
        context = torch.einsum("bnqk,bkv->bqnv", self.dropout(weights), values)
        output = self.W_o(context.reshape(B, Tq, H * self.value_dim))
        return output, weights
