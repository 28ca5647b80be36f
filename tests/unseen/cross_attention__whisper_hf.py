"""BUG: none
STYLE: Hugging Face Whisper's _shape, the cache reused
"""
"""After Hugging Face's WhisperAttention as used for encoder-decoder (cross) attention."""
import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        if (self.head_dim * num_heads) != self.embed_dim:
            raise ValueError(
                f"embed_dim must be divisible by num_heads (got `embed_dim`: {self.embed_dim}"
                f" and `num_heads`: {num_heads}).")
        self.scaling = self.head_dim ** -0.5
        kv_dim = embed_dim if memory_dim is None else memory_dim
        self.W_k = nn.Linear(kv_dim, embed_dim, bias=True)
        self.W_v = nn.Linear(kv_dim, embed_dim, bias=True)
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=True)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=True)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        bsz, tgt_len, _ = x.size()
        query_states = self._shape(self.W_q(x) * self.scaling, tgt_len, bsz)
        if cache is not None:
            # reuse k, v, cross_attentions
            key_states, value_states = cache
        elif memory is not None:
            key_states = self._shape(self.W_k(memory), -1, bsz)
            value_states = self._shape(self.W_v(memory), -1, bsz)
        else:
            raise ValueError("CrossAttention needs `memory` on the first call (or a `cache`)")
        past_key_value = (key_states, value_states)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))
        if memory_mask is not None:
            causal_mask = memory_mask[:, None, None, :]
            attn_weights = attn_weights.masked_fill(~causal_mask, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        if memory_mask is not None:
            attn_weights = attn_weights.masked_fill(~causal_mask, 0.0)
        attn_probs = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = torch.matmul(attn_probs, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, -1)
        attn_output = self.W_o(attn_output)
        return attn_output, attn_weights, past_key_value
