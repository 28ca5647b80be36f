"""BUG: none
STYLE: Meta LLaMA Attention (wq/wk/wv/wo, repeat_kv by expand+reshape, additive -inf mask built as triu(1) hstacked after zeros for the cached part, softmax in float then type_as) with a preallocated cache tensor per call filled by slice assignment; HF rotate_half RoPE inline
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _rope(x, positions, base):
    d = x.shape[-1]
    dt = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).to(dt) / d))
    freqs = positions.to(dt)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return (x.to(dt) * emb.cos() + _rotate_half(x.to(dt)) * emb.sin()).to(x.dtype)


def repeat_kv(x, n_rep):
    bs, n_kv_heads, slen, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, None, :, :]
            .expand(bs, n_kv_heads, n_rep, slen, head_dim)
            .reshape(bs, n_kv_heads * n_rep, slen, head_dim))


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.n_heads = num_heads
        self.n_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if self.n_kv_heads < 1:
            raise ValueError("num_kv_heads must be >= 1")
        if num_heads % self.n_kv_heads != 0:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head size must be even for RoPE")
        self.n_rep = self.n_heads // self.n_kv_heads
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        start_pos = 0 if cache is None else cache[0].shape[2]
        xq = self.W_q(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.W_k(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = self.W_v(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        pos = torch.arange(start_pos, start_pos + seqlen, device=x.device)
        xq = _rope(xq, pos, self.rope_base)
        xk = _rope(xk, pos, self.rope_base)

        total = start_pos + seqlen
        cache_k = xk.new_zeros(bsz, self.n_kv_heads, total, self.head_dim)
        cache_v = xv.new_zeros(bsz, self.n_kv_heads, total, self.head_dim)
        if cache is not None:
            cache_k[:, :, :start_pos] = cache[0]
            cache_v[:, :, :start_pos] = cache[1]
        cache_k[:, :, start_pos:total] = xk
        cache_v[:, :, start_pos:total] = xv

        keys = repeat_kv(cache_k, self.n_rep)
        values = repeat_kv(cache_v, self.n_rep)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device)
        mask = torch.triu(mask, diagonal=1)
        mask = torch.hstack([torch.zeros((seqlen, start_pos), device=x.device), mask]).to(scores.dtype)
        scores = scores + mask
        scores = F.softmax(scores.float() if scores.dtype != torch.float64 else scores, dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.W_o(output), (cache_k, cache_v)
