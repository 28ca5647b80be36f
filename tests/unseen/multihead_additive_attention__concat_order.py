"""BUG: the per-head contexts (B, H, Tq, dv) are flattened as permute(0, 2, 3, 1) -> (B, Tq, dv, H), so the concatenation interleaves features (feature f of head n lands at column f*H + n instead of n*dv + f) before W_o. Weights are right. Differs on: output for num_heads > 1 and value_dim > 1.
STAGE: context (B, Tq, H*dv) column order
STYLE: batched matmul with a permute/reshape merge of the heads (wrong permutation)
"""
import torch
from torch import nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) * 0.1)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk, dv = keys.shape[1], values.shape[-1]
        H, h = self.num_heads, self.attn_dim
        q = self.W_q(queries).view(B, Tq, H, h).permute(0, 2, 1, 3)
        k = self.W_k(keys).view(B, Tk, H, h).permute(0, 2, 1, 3)
        feats = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))
        scores = (feats * self.w_v[None, :, None, None, :]).sum(-1)      # (B, H, Tq, Tk)
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            keep = (torch.arange(Tk, device=scores.device) < lens[..., None]).unsqueeze(1)
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1) * keep
        else:
            weights = torch.softmax(scores, dim=-1)
        ctx = self.dropout(weights) @ values.unsqueeze(1)                  # (B, H, Tq, dv)
        ctx = ctx.permute(0, 2, 3, 1).reshape(B, Tq, H * dv)
        return self.W_o(ctx), weights
