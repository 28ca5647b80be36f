"""BUG: none
STYLE: unflatten heads, (features * w_v).sum(-1) scores, softmax written as exp(s - logsumexp(s)) over the masked scores with a guard for empty rows, and the context by matmul broadcasting over the head axis.
"""
import torch
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.n_heads = num_heads
        self.d_attn = attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.empty(num_heads, attn_dim))
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.attn_dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.w_v)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.size(1)
        q = self.W_q(queries).unflatten(-1, (self.n_heads, self.d_attn)).permute(0, 2, 1, 3)  # (B,H,Tq,h)
        k = self.W_k(keys).unflatten(-1, (self.n_heads, self.d_attn)).permute(0, 2, 1, 3)  # (B,H,Tk,h)
        w = self.w_v[None, :, None, None, :]
        scores = (torch.tanh(q[:, :, :, None, :] + k[:, :, None, :, :]) * w).sum(dim=-1)  # (B,H,Tq,Tk)

        if valid_lens is not None:
            vl = valid_lens.to(scores.device)
            if vl.dim() == 1:
                vl = vl.unsqueeze(-1)  # (B, 1) broadcasts over queries
            allowed = torch.arange(Tk, device=scores.device) < vl.unsqueeze(-1)  # (B, Tq or 1, Tk)
            allowed = allowed.unsqueeze(1)  # (B, 1, Tq or 1, Tk)
            scores = scores.masked_fill(~allowed, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        lse = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
        weights = torch.exp(scores - lse)

        context = self.attn_dropout(weights) @ values.unsqueeze(1)  # (B, H, Tq, dv)
        context = context.transpose(1, 2).flatten(2)  # (B, Tq, H*dv)
        return self.W_o(context), weights
