"""BUG: the new tokens are rotated at positions 0..T-1 whatever the cache length P (positions not offset by the cache length), so decode steps rotate queries/keys as if they were the first tokens. Differs on: any call with a cache (P > 0); calls without a cache are right.
STAGE: RoPE positions of the new tokens -> rotated q and k (and the returned cache k)
STYLE: Hugging Face LlamaAttention port (position_ids = arange(seq_len), repeat_kv, eager attention)
"""
import math

import torch
from torch import nn


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads != 0")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError("bad num_kv_heads")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2:
            raise ValueError("odd head_dim")
        self.num_heads, self.num_key_value_heads = num_heads, num_kv_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.rope_theta = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def _cos_sin(self, position_ids, dtype, device):
        dt = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        inv_freq = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2, device=device).to(dt) / self.head_dim))
        freqs = position_ids.to(dt)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.shape
        q = self.W_q(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        past = 0 if cache is None else cache[0].shape[2]
        position_ids = torch.arange(q_len, device=x.device)
        cos, sin = self._cos_sin(position_ids, x.dtype, x.device)
        q = (q * cos + rotate_half(q) * sin).to(x.dtype)
        k = (k * cos + rotate_half(k) * sin).to(x.dtype)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        key_states = repeat_kv(k, self.num_key_value_groups)
        value_states = repeat_kv(v, self.num_key_value_groups)
        attn = torch.matmul(q, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        kv_len = past + q_len
        causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(past)
        attn = attn.masked_fill(~causal, float("-inf"))
        attn = nn.functional.softmax(attn, dim=-1, dtype=torch.float32 if attn.dtype != torch.float64 else torch.float64).to(q.dtype)
        out = torch.matmul(attn, value_states).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.W_o(out), (k, v)
