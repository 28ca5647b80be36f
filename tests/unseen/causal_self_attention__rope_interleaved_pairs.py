"""BUG: ported from Meta's LLaMA, RoPE rotates interleaved pairs (2i, 2i+1) via view_as_complex on (..., d/2, 2), but the contract fixes interleaved=False (pairs (i, i + d/2)).
STAGE: the rotary embedding
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def _precompute_freqs_cis(dim, start, end, theta, dtype, device):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device, dtype=torch.float64)[: (dim // 2)] / dim))
    t = torch.arange(start, end, device=device).to(dtype)
    freqs = torch.outer(t, freqs.to(dtype))
    return torch.polar(torch.ones_like(freqs), freqs)


def _apply_rotary_emb(xq, xk, freqs_cis):
    real = freqs_cis.real.dtype
    xq_ = torch.view_as_complex(xq.to(real).reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.to(real).reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis[None, :, None, :]
    xq_out = torch.view_as_real(xq_ * fc).flatten(3)
    xk_out = torch.view_as_real(xk_ * fc).flatten(3)
    return xq_out.to(xq.dtype), xk_out.to(xk.dtype)


def _repeat_kv(x, n_rep):
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
        if self.n_kv_heads < 1:
            raise ValueError("n_kv_heads must be >= 1")
        if num_heads % self.n_kv_heads != 0:
            raise ValueError("n_heads must be divisible by n_kv_heads")
        self.n_heads = num_heads
        self.n_rep = num_heads // self.n_kv_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("head_dim must be even")
        self.theta = float(rope_base)
        self.W_q = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, self.n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        start_pos = 0 if cache is None else cache[0].shape[2]
        xq = self.W_q(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.W_k(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.W_v(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        real = torch.float64 if x.dtype == torch.float64 else torch.float32
        freqs_cis = _precompute_freqs_cis(self.head_dim, start_pos, start_pos + seqlen, self.theta, real, x.device)
        xq, xk = _apply_rotary_emb(xq, xk, freqs_cis)

        k_new = xk.transpose(1, 2)
        v_new = xv.transpose(1, 2)
        if cache is not None:
            keys_all = torch.cat([cache[0], k_new], dim=2)
            values_all = torch.cat([cache[1], v_new], dim=2)
        else:
            keys_all, values_all = k_new, v_new

        keys = _repeat_kv(keys_all.transpose(1, 2), self.n_rep).transpose(1, 2)
        values = _repeat_kv(values_all.transpose(1, 2), self.n_rep).transpose(1, 2)
        xq = xq.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        total = keys.shape[2]
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device, dtype=scores.dtype).triu(1)
        mask = torch.hstack([torch.zeros((seqlen, start_pos), device=x.device, dtype=scores.dtype), mask])
        assert mask.shape[-1] == total
        scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq) if xq.dtype in (torch.float16, torch.bfloat16) \
            else F.softmax(scores, dim=-1)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.W_o(output), (keys_all, values_all)
