"""STYLE: fairseq MultiheadAttention (q * self.scaling, `.contiguous().view(bsz * num_heads, -1, head_dim)`) ported to batch-first
BUG: The head split views the batch-first (B, T, E) projection directly as (B*H, T, d), as fairseq does for time-first input, so "heads" are slices of the flattened (T, E) block, not feature groups.
STAGE: head split
WHEN: num_heads > 1 and Tq > 1 (or Tk > 1).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.W_k = nn.Linear(embed_dim, embed_dim, bias=True)
        self.W_v = nn.Linear(embed_dim, embed_dim, bias=True)
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=True)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=True)
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        bsz, tgt_len, embed_dim = queries.size()
        src_len = keys.size(1)
        q = self.W_q(queries)
        k = self.W_k(keys)
        v = self.W_v(values)
        q = q * self.scaling
        q = q.contiguous().view(bsz * self.num_heads, tgt_len, self.head_dim)
        k = k.contiguous().view(bsz * self.num_heads, src_len, self.head_dim)
        v = v.contiguous().view(bsz * self.num_heads, src_len, self.head_dim)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        if mask is not None:
            attn_mask = mask.expand(bsz, self.num_heads, tgt_len, src_len).reshape(bsz * self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(~attn_mask, torch.finfo(attn_weights.dtype).min)
        attn_weights_float = F.softmax(attn_weights, dim=-1)
        if mask is not None:
            attn_weights_float = attn_weights_float.masked_fill(~attn_mask, 0.0)
        attn_probs = self.dropout_module(attn_weights_float)
        attn = torch.bmm(attn_probs, v)
        attn = attn.contiguous().view(bsz, tgt_len, embed_dim)
        attn = self.W_o(attn)
        return attn, attn_weights_float.view(bsz, self.num_heads, tgt_len, src_len)
