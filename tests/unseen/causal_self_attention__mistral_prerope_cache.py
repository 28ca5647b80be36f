"""STYLE: Mistral reference implementation (ModelArgs-like fields, precompute_freqs_cis, cache.update before rotary, repeat_kv)
BUG: The KV cache is updated with the keys before RoPE is applied, so the returned cache holds unrotated keys and later calls attend to unrotated past keys.
STAGE: cache
WHEN: Every returned cache (keys at positions > 0 differ), and the outputs of any call made with a cache (P > 0).
"""
import torch
from torch import nn


def precompute_freqs_cis(dim, positions, theta, dtype):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device, dtype=dtype)[: dim // 2] / dim))
    freqs = positions.to(dtype)[:, None] * freqs[None, :]
    return torch.cos(freqs), torch.sin(freqs)


def apply_rotary_emb(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def repeat_kv(keys, values, repeats, dim):
    keys = torch.repeat_interleave(keys, repeats=repeats, dim=dim)
    values = torch.repeat_interleave(values, repeats=repeats, dim=dim)
    return keys, values


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        n_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError("dim must be divisible by n_heads")
        if n_kv_heads < 1 or num_heads % n_kv_heads != 0:
            raise ValueError("n_heads must be a positive multiple of n_kv_heads")
        self.n_heads = num_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even for rotary embeddings")
        self.repeats = self.n_heads // self.n_kv_heads
        self.rope_theta = rope_base
        self.scale = self.head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        start_pos = 0 if cache is None else cache[0].shape[2]
        xq, xk, xv = self.W_q(x), self.W_k(x), self.W_v(x)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = xk.view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = xv.view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        # cache update
        if cache is None:
            cache_k, cache_v = xk, xv
        else:
            cache_k = torch.cat([cache[0], xk], dim=2)
            cache_v = torch.cat([cache[1], xv], dim=2)
        work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        positions = torch.arange(start_pos, start_pos + seqlen, device=x.device)
        cos, sin = precompute_freqs_cis(self.head_dim, positions, self.rope_theta, work)
        xq = apply_rotary_emb(xq.to(work), cos, sin).to(x.dtype)
        xk = apply_rotary_emb(xk.to(work), cos, sin).to(x.dtype)
        if cache is None:
            key, val = xk, xv
        else:
            key = torch.cat([cache[0], xk], dim=2)
            val = torch.cat([cache[1], xv], dim=2)
        key, val = repeat_kv(key, val, self.repeats, dim=1)
        scores = torch.matmul(xq, key.transpose(2, 3)) * self.scale
        total = start_pos + seqlen
        mask = torch.full((seqlen, total), float("-inf"), dtype=scores.dtype, device=x.device)
        mask = torch.triu(mask, diagonal=start_pos + 1)
        scores = scores + mask
        scores = torch.softmax(scores, dim=-1)
        output = torch.matmul(scores, val)
        output = output.transpose(1, 2).reshape(bsz, seqlen, -1)
        return self.W_o(output), (cache_k, cache_v)
