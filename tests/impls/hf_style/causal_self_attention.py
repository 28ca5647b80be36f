"""Hugging Face LlamaAttention's layout: a non-persistent inv_freq buffer, cos/sin with rotate_half, repeat_kv."""
import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
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
        self.num_heads = num_heads
        self.num_key_value_heads = num_kv_heads or num_heads
        if num_kv_heads is not None and num_kv_heads < 1:
            raise ValueError("num_kv_heads must be positive")
        if embed_dim % num_heads or num_heads % self.num_key_value_heads:
            raise ValueError("embed_dim % num_heads and num_heads % num_kv_heads must be 0")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2:
            raise ValueError("head_dim must be even")
        self.num_key_value_groups = num_heads // self.num_key_value_heads
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.num_key_value_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.num_key_value_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, cache=None):
        bsz, q_len, _ = x.shape
        past = 0 if cache is None else cache[0].shape[2]
        q = self.W_q(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        position_ids = torch.arange(past, past + q_len, device=x.device, dtype=work)
        freqs = position_ids[:, None] * self.inv_freq.to(device=x.device, dtype=work)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        key_states, value_states = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        attn = torch.matmul(q, key_states.transpose(2, 3)) / self.head_dim ** 0.5
        causal = torch.full((q_len, past + q_len), torch.finfo(attn.dtype).min, dtype=attn.dtype, device=x.device)
        causal = torch.triu(causal, diagonal=past + 1)
        upcast = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype  # HF: always float32
        attn = nn.functional.softmax(attn + causal, dim=-1, dtype=upcast).to(q.dtype)
        out = torch.matmul(attn, value_states).transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.W_o(out), (k, v)
