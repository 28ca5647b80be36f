"""BUG: none
STYLE: fairseq MultiheadAttention encoder-decoder path (static_kv): q scaled before the bmm, (bsz*heads, len, head_dim) layout, key_padding_mask via masked_fill(-inf), prev_key reuse.
"""
import torch
from torch import nn
import torch.nn.functional as F


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        kdim = embed_dim if memory_dim is None else memory_dim
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(kdim, embed_dim)
        self.W_v = nn.Linear(kdim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        if cache is None and memory is None:
            raise ValueError("need memory or a cache")
        bsz, tgt_len, embed_dim = x.size()
        H, hd = self.num_heads, self.head_dim
        q = self.W_q(x) * self.scaling
        if cache is not None:
            prev_key, prev_value = cache                                   # static_kv: reuse
        else:
            src = memory.size(1)
            prev_key = self.W_k(memory).view(bsz, src, H, hd).transpose(1, 2)
            prev_value = self.W_v(memory).view(bsz, src, H, hd).transpose(1, 2)
        src_len = prev_key.size(2)
        q = q.contiguous().view(bsz, tgt_len, H, hd).transpose(1, 2).reshape(bsz * H, tgt_len, hd)
        k = prev_key.reshape(bsz * H, src_len, hd)
        v = prev_value.reshape(bsz * H, src_len, hd)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        if memory_mask is not None:
            attn_weights = attn_weights.view(bsz, H, tgt_len, src_len)
            pad = ~memory_mask[:, None, None, :]
            attn_weights = attn_weights.masked_fill(pad, float("-inf"))
            empty = pad.all(dim=-1, keepdim=True)
            attn_weights = attn_weights.masked_fill(empty, 0.0).view(bsz * H, tgt_len, src_len)
        attn_weights_float = F.softmax(attn_weights, dim=-1)
        if memory_mask is not None:
            attn_weights_float = attn_weights_float.view(bsz, H, tgt_len, src_len).masked_fill(
                empty, 0.0).view(bsz * H, tgt_len, src_len)
        attn_probs = self.dropout_module(attn_weights_float)
        attn = torch.bmm(attn_probs, v)
        attn = attn.view(bsz, H, tgt_len, hd).transpose(1, 2).reshape(bsz, tgt_len, embed_dim)
        attn = self.W_o(attn)
        return attn, attn_weights_float.view(bsz, H, tgt_len, src_len), (prev_key, prev_value)
