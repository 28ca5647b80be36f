"""BUG: an additive -inf mask cleaned with nan_to_num: NaN gradients where a valid_len is 0
STYLE: additive mask
"""
"""Multi-head additive attention with a float attention mask added to the scores
(0 for valid keys, -inf for padding, like Hugging Face's extended attention masks), and
nan_to_num after softmax to clean rows with valid_len 0: forward values are right.

BUG: softmax's backward on an all -inf row is NaN, and the additive mask passes it to the
scores, so every parameter and input gets NaN gradients once some valid_len is 0.
"""
import torch
import torch.nn as nn


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
        Tk = keys.shape[1]
        H, a = self.num_heads, self.attn_dim
        q = self.W_q(queries).reshape(B, Tq, H, a).transpose(1, 2)
        k = self.W_k(keys).reshape(B, Tk, H, a).transpose(1, 2)
        scores = torch.einsum("bhqka,ha->bhqk", torch.tanh(q[:, :, :, None] + k[:, :, None]), self.w_v)
        if valid_lens is not None:
            lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
            pad = torch.arange(Tk, device=scores.device)[None, None, :] >= lens[..., None]   # (B, *, Tk)
            ext = torch.zeros(pad.shape, dtype=scores.dtype, device=scores.device).masked_fill(pad, float("-inf"))
            scores = scores + ext[:, None]
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        ctx = torch.einsum("bhqk,bkd->bqhd", self.dropout(weights), values).reshape(B, Tq, -1)
        return self.W_o(ctx), weights
