"""BUG: none
STYLE: fairseq static_kv, time-first inside, q scaled before the product, -inf handled on all-padding rows
"""
"""Encoder-decoder attention after fairseq's MultiheadAttention (static_kv, time-first inside)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = memory_dim if memory_dim is not None else embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.W_k = nn.Linear(self.kdim, embed_dim)
        self.W_v = nn.Linear(self.kdim, embed_dim)
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        bsz, tgt_len, embed_dim = x.size()
        query = x.transpose(0, 1)                                  # fairseq is Time x Batch x Channel
        q = self.W_q(query) * self.scaling
        if cache is not None:
            k, v = cache                                           # static_kv: reuse
        else:
            if memory is None:
                raise ValueError("need memory or a cache")
            key = memory.transpose(0, 1)
            src_len = key.size(0)
            k = self.W_k(key).view(src_len, bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
            v = self.W_v(key).view(src_len, bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        src_len = k.size(2)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k_ = k.reshape(bsz * self.num_heads, src_len, self.head_dim)
        v_ = v.reshape(bsz * self.num_heads, src_len, self.head_dim)

        attn_weights = torch.bmm(q, k_.transpose(1, 2))
        if memory_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            pad = ~memory_mask.unsqueeze(1).unsqueeze(2).to(torch.bool)
            attn_weights = attn_weights.masked_fill(pad, float("-inf"))
            # rows that are entirely padding: avoid NaN from softmax over all -inf
            all_pad = pad.all(dim=-1, keepdim=True)
            attn_weights = attn_weights.masked_fill(all_pad, 0.0)
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights_float = F.softmax(attn_weights, dim=-1)
        if memory_mask is not None:
            keep = (~all_pad).to(attn_weights_float.dtype).expand(bsz, self.num_heads, tgt_len, 1)
            attn_weights_float = attn_weights_float * keep.reshape(bsz * self.num_heads, tgt_len, 1)
        attn_probs = F.dropout(attn_weights_float, p=self.dropout, training=self.training)
        attn = torch.bmm(attn_probs, v_)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        attn = self.W_o(attn).transpose(0, 1)
        weights = attn_weights_float.view(bsz, self.num_heads, tgt_len, src_len)
        return attn, weights, (k, v)
