"""BUG: none
STYLE: Hugging Face BartAttention (is_cross_attention with past_key_value reuse, _shape helper, 4-D additive attention mask from _prepare_4d_attention_mask with finfo.min).
"""
import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"embed_dim must be divisible by num_heads (got `embed_dim`: {embed_dim}"
                             f" and `num_heads`: {num_heads}).")
        mem = embed_dim if memory_dim is None else memory_dim
        self.scaling = self.head_dim ** -0.5
        self.W_k = nn.Linear(mem, embed_dim)
        self.W_v = nn.Linear(mem, embed_dim)
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    @staticmethod
    def _expand_mask(mask, dtype, tgt_len):
        bsz, src_len = mask.size()
        expanded = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
        inverted = 1.0 - expanded
        return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        bsz, tgt_len, _ = x.size()
        query_states = self._shape(self.W_q(x) * self.scaling, tgt_len, bsz)
        if cache is not None:
            key_states, value_states = cache
        elif memory is not None:
            key_states = self._shape(self.W_k(memory), -1, bsz)
            value_states = self._shape(self.W_v(memory), -1, bsz)
        else:
            raise ValueError("memory=None requires a cache")
        past_key_value = (key_states, value_states)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))
        if memory_mask is not None:
            attn_weights = attn_weights + self._expand_mask(memory_mask, attn_weights.dtype, tgt_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        if memory_mask is not None:
            attn_weights = attn_weights * memory_mask.any(-1)[:, None, None, None].to(attn_weights.dtype)
        attn_probs = self.dropout(attn_weights)
        attn_output = torch.matmul(attn_probs, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, self.embed_dim)
        return self.W_o(attn_output), attn_weights, past_key_value
