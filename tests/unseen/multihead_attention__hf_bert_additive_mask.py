"""BUG: none
STYLE: HuggingFace BertSelfAttention style: transpose_for_scores, an additive extended mask of finfo.min, dropout on the probs, permute + view back, then W_o.
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
        self.all_head_size = self.num_attention_heads * self.attention_head_size

        self.W_q = nn.Linear(embed_dim, self.all_head_size)
        self.W_k = nn.Linear(embed_dim, self.all_head_size)
        self.W_v = nn.Linear(embed_dim, self.all_head_size)
        self.W_o = nn.Linear(self.all_head_size, embed_dim)

        self.attn_dropout = nn.Dropout(dropout)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, queries, keys, values, mask=None):
        query_layer = self.transpose_for_scores(self.W_q(queries))
        key_layer = self.transpose_for_scores(self.W_k(keys))
        value_layer = self.transpose_for_scores(self.W_v(values))

        # Take the dot product between "query" and "key" to get the raw attention scores.
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)

        if mask is not None:
            # extended attention mask: 0.0 where we attend, a very large negative number elsewhere
            extended_attention_mask = (1.0 - mask.to(attention_scores.dtype)) * torch.finfo(attention_scores.dtype).min
            attention_scores = attention_scores + extended_attention_mask

        # Normalize the attention scores to probabilities.
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)

        if mask is not None:
            # a fully masked row came out uniform; the spec wants it all zeros
            has_any = mask.any(dim=-1, keepdim=True)
            attention_probs = attention_probs.masked_fill(~has_any, 0.0)

        # This is actually dropping out entire tokens to attend to, which might
        # seem a bit unusual, but is taken from the original Transformer paper.
        dropped_probs = self.attn_dropout(attention_probs)

        context_layer = torch.matmul(dropped_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)

        return self.W_o(context_layer), attention_probs
