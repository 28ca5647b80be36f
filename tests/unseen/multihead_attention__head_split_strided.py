"""BUG: head n takes features n::H (a strided split)
STYLE: per-feature stride
"""
"""After Hugging Face's BertSelfAttention (eager path) plus BertSelfOutput's dense."""
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"The hidden size ({embed_dim}) is not a multiple of the number of attention "
                f"heads ({num_heads})")
        self.num_attention_heads = num_heads
        self.attention_head_size = embed_dim // num_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.W_q = nn.Linear(embed_dim, self.all_head_size)
        self.W_k = nn.Linear(embed_dim, self.all_head_size)
        self.W_v = nn.Linear(embed_dim, self.all_head_size)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.attention_head_size, self.num_attention_heads)
        x = x.view(new_x_shape)
        return x.permute(0, 3, 1, 2)

    def forward(self, queries, keys, values, mask=None):
        query_layer = self.transpose_for_scores(self.W_q(queries))
        key_layer = self.transpose_for_scores(self.W_k(keys))
        value_layer = self.transpose_for_scores(self.W_v(values))

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if mask is not None:
            attention_scores = torch.where(mask, attention_scores,
                                           torch.finfo(attention_scores.dtype).min)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        if mask is not None:
            attention_probs = attention_probs * mask   # bool -> dtype, zeros fully masked rows
        context_layer = torch.matmul(self.dropout(attention_probs), value_layer)

        context_layer = context_layer.permute(0, 2, 3, 1).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return self.W_o(context_layer), attention_probs
