"""STYLE: Gemma reference code (config object, query_pre_attn_scalar, queries pre-scaled before the einsum)
BUG: Queries are pre-scaled by query_pre_attn_scalar ** -0.5 with query_pre_attn_scalar set to embed_dim instead of the head size d.
STAGE: scaled scores
WHEN: num_heads > 1 (with one head embed_dim == d and the result is right).
"""
import dataclasses

import torch
from torch import nn


@dataclasses.dataclass
class AttentionConfig:
    hidden_size: int
    num_attention_heads: int
    attention_dropout: float = 0.0

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def query_pre_attn_scalar(self):
        return self.hidden_size


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"hidden_size {embed_dim} is not a multiple of num_attention_heads {num_heads}")
        self.config = AttentionConfig(embed_dim, num_heads, dropout)
        self.num_heads = num_heads
        self.head_dim = self.config.head_dim
        self.scaling = self.config.query_pre_attn_scalar ** -0.5
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, mask=None):
        batch_size, input_len, _ = queries.shape
        kv_len = keys.shape[1]
        xq = self.W_q(queries).view(batch_size, input_len, self.num_heads, self.head_dim)
        xk = self.W_k(keys).view(batch_size, kv_len, self.num_heads, self.head_dim)
        xv = self.W_v(values).view(batch_size, kv_len, self.num_heads, self.head_dim)
        xq = xq * self.scaling
        # [batch_size, n_local_heads, input_len, kv_len]
        scores = torch.einsum("bqnh,bknh->bnqk", xq, xk)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        if mask is not None:
            probs = probs * mask
        output = torch.einsum("bnqk,bknh->bqnh", self.attn_dropout(probs), xv)
        output = output.reshape(batch_size, input_len, -1)
        return self.W_o(output), probs
