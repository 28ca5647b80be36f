"""STYLE: Hugging Face BART/fairseq-style encoder-decoder attention: separate q/k/v projections, query pre-scaled by head_dim**-0.5, 4-D matmul, static (k, v) cache reused across steps
BUG: none
STAGE: none
"""
import torch
from torch import nn
import torch.nn.functional as F


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim must be divisible by num_heads (got embed_dim={embed_dim}, num_heads={num_heads})"
            )
        if memory_dim is None:
            memory_dim = embed_dim
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.dropout = dropout
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(memory_dim, embed_dim)
        self.W_v = nn.Linear(memory_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        bsz, tgt_len, _ = x.size()

        query_states = self.W_q(x) * self.scaling
        if cache is not None:
            # reuse k, v: cross-attention keys/values never change during decoding
            key_states, value_states = cache
        else:
            if memory is None:
                raise ValueError("CrossAttention needs `memory` when no cache is given")
            key_states = self._shape(self.W_k(memory), -1, bsz)
            value_states = self._shape(self.W_v(memory), -1, bsz)
        past_key_value = (key_states, value_states)

        query_states = self._shape(query_states, tgt_len, bsz)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))  # (B, H, Tq, S)

        if memory_mask is not None:
            allowed = memory_mask[:, None, None, :]
            attn_weights = attn_weights.masked_fill(~allowed, torch.finfo(attn_weights.dtype).min)
            attn_weights = F.softmax(attn_weights, dim=-1)
            attn_weights = attn_weights.masked_fill(~allowed, 0.0)
        else:
            attn_weights = F.softmax(attn_weights, dim=-1)

        attn_probs = F.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = torch.matmul(attn_probs, value_states)                     # (B, H, Tq, d)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, self.embed_dim)
        attn_output = self.W_o(attn_output)
        return attn_output, attn_weights, past_key_value
