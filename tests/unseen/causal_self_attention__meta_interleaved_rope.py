"""STYLE: Meta's llama/model.py Attention (precompute_freqs_cis, apply_rotary_emb via view_as_complex, repeat_kv)
BUG: RoPE rotates adjacent feature pairs (2i, 2i+1) as in Meta's checkpoints, instead of the rotate-half pairs (i, i + d/2) that interleaved=False requires.
STAGE: rotation
WHEN: always (P = 0 included)
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def precompute_freqs_cis(dim, start, end, theta, dtype, device):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device, dtype=dtype)[: (dim // 2)] / dim))
    t = torch.arange(start, end, device=device, dtype=dtype)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    work = freqs_cis.real.dtype
    xq_ = torch.view_as_complex(xq.to(work).reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.to(work).reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep):
    """torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(bs, slen, n_kv_heads * n_rep, head_dim)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        self.n_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError("dim must be divisible by n_heads")
        if self.n_kv_heads < 1 or num_heads % self.n_kv_heads != 0:
            raise ValueError("n_heads must be divisible by n_kv_heads")
        self.n_heads = num_heads
        self.n_rep = num_heads // self.n_kv_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even")
        self.rope_theta = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        start_pos = 0 if cache is None else cache[0].shape[2]
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        freqs_cis = precompute_freqs_cis(self.head_dim, start_pos, start_pos + seqlen, self.rope_theta, work, x.device)

        xq = self.W_q(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.W_k(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.W_v(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis[:, None, :])

        xk, xv = xk.transpose(1, 2), xv.transpose(1, 2)  # (bs, n_kv_heads, seqlen, head_dim)
        if cache is not None:
            xk = torch.cat([cache[0], xk], dim=2)
            xv = torch.cat([cache[1], xv], dim=2)
        new_cache = (xk, xv)

        keys = repeat_kv(xk.transpose(1, 2), self.n_rep).transpose(1, 2)
        values = repeat_kv(xv.transpose(1, 2), self.n_rep).transpose(1, 2)
        xq = xq.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device, dtype=scores.dtype).triu(1)
        mask = torch.hstack([torch.zeros((seqlen, start_pos), device=x.device, dtype=scores.dtype), mask])
        scores = scores + mask
        scores = F.softmax(scores, dim=-1)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.W_o(output), new_cache
