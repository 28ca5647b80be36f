"""BUG: none
STYLE: LLaMA's eager path in transformers: repeat_kv for the key/value heads, an additive mask filled with finfo.min built with triu.
"""
import math
import torch
from torch import nn

from .rope import apply_rope


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class CausalSelfAttention(nn.Module):
    """Hugging Face LlamaAttention flavour (eager path)."""

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_kv_heads < 1:
            raise ValueError("num_kv_heads must be >= 1")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even for RoPE")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_key_value_heads = num_kv_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.rope_theta = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.size()
        past_len = 0 if cache is None else cache[0].shape[-2]
        query_states = self.W_q(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.W_k(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = self.W_v(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        position_ids = torch.arange(past_len, past_len + q_len, device=x.device).unsqueeze(0)
        query_states = apply_rope(query_states, position_ids, base=self.rope_theta)
        key_states = apply_rope(key_states, position_ids, base=self.rope_theta)

        if cache is not None:
            key_states = torch.cat([cache[0], key_states], dim=2)
            value_states = torch.cat([cache[1], value_states], dim=2)
        present = (key_states, value_states)

        k = repeat_kv(key_states, self.num_key_value_groups)
        v = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, k.transpose(2, 3)) / math.sqrt(self.head_dim)

        kv_len = k.shape[-2]
        min_dtype = torch.finfo(attn_weights.dtype).min
        causal_mask = torch.full((q_len, kv_len), fill_value=min_dtype, dtype=attn_weights.dtype, device=x.device)
        causal_mask = torch.triu(causal_mask, diagonal=past_len + 1)
        attn_weights = attn_weights + causal_mask[None, None]

        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32 if attn_weights.dtype in (torch.float16, torch.bfloat16) else attn_weights.dtype).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, v)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.W_o(attn_output), present
