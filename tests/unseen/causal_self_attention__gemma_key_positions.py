"""STYLE: Gemma PyTorch reference (GemmaAttention with input_pos, kv_write_indices, apply_rotary_emb on xq and xk)
BUG: The new tokens' queries are rotated at positions P..P+T-1 but their keys at 0..T-1 (kv_write_indices offset applied only to the queries' freqs).
STAGE: rope positions
WHEN: Any call with a non-empty cache (P > 0); the returned cache keys are wrong too.
"""
import torch
from torch import nn


def precompute_freqs(dim, end_positions, theta, dtype):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=end_positions.device, dtype=dtype)[: (dim // 2)] / dim))
    freqs = torch.outer(end_positions.to(dtype), freqs)
    return freqs.cos(), freqs.sin()


def apply_rotary_emb(x, cos, sin):
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError("hidden_size must be divisible by num_heads")
        if self.num_kv_heads < 1 or num_heads % self.num_kv_heads:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        self.num_queries_per_kv = self.num_heads // self.num_kv_heads
        self.hidden_size = embed_dim
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2:
            raise ValueError("head_dim must be even")
        self.rope_theta = rope_base
        self.scaling = self.head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, self.num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(self.num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        batch_size, input_len, _ = x.shape
        past = 0 if cache is None else cache[0].shape[2]
        kv_write_indices = torch.arange(past, past + input_len, device=x.device)
        xq = self.W_q(x).view(batch_size, input_len, self.num_heads, self.head_dim)
        xk = self.W_k(x).view(batch_size, input_len, self.num_kv_heads, self.head_dim)
        xv = self.W_v(x).view(batch_size, input_len, self.num_kv_heads, self.head_dim)
        work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        q_cos, q_sin = precompute_freqs(self.head_dim, kv_write_indices, self.rope_theta, work)
        k_cos, k_sin = precompute_freqs(self.head_dim, kv_write_indices - past, self.rope_theta, work)
        # [batch_size, input_len, n_heads, head_dim]
        xq = apply_rotary_emb(xq.to(work), q_cos[:, None, :], q_sin[:, None, :]).to(x.dtype)
        xk = apply_rotary_emb(xk.to(work), k_cos[:, None, :], k_sin[:, None, :]).to(x.dtype)
        xk, xv = xk.transpose(1, 2), xv.transpose(1, 2)  # [batch_size, n_kv, input_len, head_dim]
        if cache is not None:
            xk = torch.cat([cache[0], xk], dim=2)
            xv = torch.cat([cache[1], xv], dim=2)
        key, value = xk, xv
        if self.num_kv_heads != self.num_heads:
            key = torch.repeat_interleave(key, self.num_queries_per_kv, dim=1)
            value = torch.repeat_interleave(value, self.num_queries_per_kv, dim=1)
        q = xq.transpose(1, 2) * self.scaling
        scores = torch.matmul(q, key.transpose(2, 3))
        allowed = torch.ones(input_len, past + input_len, dtype=torch.bool, device=x.device).tril(past)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        scores = torch.softmax(scores, dim=-1)
        output = torch.matmul(scores, value)
        output = output.transpose(1, 2).contiguous().view(batch_size, input_len, -1)
        return self.W_o(output), (xk, xv)
