"""STYLE: Meta's original LLaMA model.py (precompute_freqs_cis with torch.polar, complex-multiply RoPE, additive -inf mask with hstack for the cache)
BUG: none
STAGE: none
WHEN: never (correct on every contract input)
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def precompute_freqs_cis(dim, start, end, theta, dtype, device):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=dtype, device=device)[: (dim // 2)] / dim))
    t = torch.arange(start, end, dtype=dtype, device=device)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex


def apply_rotary_emb(xq, xk, freqs_cis):
    # rotate-half layout: pair i is (x[i], x[i + d/2])
    def rot(x):
        half = x.shape[-1] // 2
        xc = torch.complex(x[..., :half], x[..., half:]) * freqs_cis
        return torch.cat([xc.real, xc.imag], dim=-1)

    return rot(xq), rot(xk)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.n_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError("dim % n_heads != 0")
        if self.n_kv_heads < 1 or num_heads % self.n_kv_heads:
            raise ValueError("n_heads % n_kv_heads != 0")
        self.n_local_heads = num_heads
        self.n_rep = num_heads // self.n_kv_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2:
            raise ValueError("head_dim must be even")
        self.rope_theta = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        start_pos = 0 if cache is None else cache[0].shape[2]
        work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        freqs_cis = precompute_freqs_cis(self.head_dim, start_pos, start_pos + seqlen, self.rope_theta, work, x.device)
        xq = self.W_q(x).view(bsz, seqlen, self.n_local_heads, self.head_dim).transpose(1, 2)
        xk = self.W_k(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = self.W_v(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xq, xk = apply_rotary_emb(xq.to(work), xk.to(work), freqs_cis)
        xq, xk = xq.to(x.dtype), xk.to(x.dtype)
        if cache is not None:
            keys = torch.cat([cache[0], xk], dim=2)
            values = torch.cat([cache[1], xv], dim=2)
        else:
            keys, values = xk, xv
        new_cache = (keys, values)
        b, hkv, slen, hd = keys.shape
        keys_r = keys[:, :, None].expand(b, hkv, self.n_rep, slen, hd).reshape(b, hkv * self.n_rep, slen, hd)
        values_r = values[:, :, None].expand(b, hkv, self.n_rep, slen, hd).reshape(b, hkv * self.n_rep, slen, hd)
        scores = torch.matmul(xq, keys_r.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((seqlen, seqlen), float("-inf"), dtype=scores.dtype, device=x.device)
        mask = torch.triu(mask, diagonal=1)
        mask = torch.hstack([torch.zeros((seqlen, start_pos), dtype=scores.dtype, device=x.device), mask])
        scores = scores + mask
        scores = F.softmax(scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores,
                           dim=-1).type_as(xq)
        output = torch.matmul(scores, values_r)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.W_o(output), new_cache
