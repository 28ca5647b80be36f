"""STYLE: Hugging Face BERT-style self-attention (boolean mask turned into an additive finfo.min bias, transpose_for_scores)
BUG: masked keys only get an additive finfo.min bias and the weights are never zeroed, so a row with no allowed key gets uniform weights (and a mean-of-values context) instead of zeros.
STAGE: weights
WHEN: a mask with a (batch, head, query) row that allows no key
"""
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"The hidden size ({embed_dim}) is not a multiple of the number of attention heads ({num_heads})"
            )
        self.num_attention_heads = num_heads
        self.attention_head_size = embed_dim // num_heads
        self.all_head_size = embed_dim
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, queries, keys, values, mask=None):
        query_layer = self.transpose_for_scores(self.W_q(queries))
        key_layer = self.transpose_for_scores(self.W_k(keys))
        value_layer = self.transpose_for_scores(self.W_v(values))

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if mask is not None:
            extended_mask = (~mask).to(attention_scores.dtype) * torch.finfo(attention_scores.dtype).min
            attention_scores = attention_scores + extended_mask

        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(self.dropout(attention_probs), value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return self.W_o(context_layer), attention_probs
