"""BUG: none
STYLE: heads folded into the batch for torch.baddbmm with an additive 0/-inf causal bias (no row is ever fully masked), RoPE as complex multiplication of torch.complex(x[:d/2], x[d/2:]) by torch.polar(1, angle).
"""
import math

import torch
from torch import nn


def _rope_complex(x, start, base):
    d = x.shape[-1]
    half = d // 2
    T = x.shape[-2]
    real = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)).to(real)
    t = torch.arange(start, start + T, device=x.device).to(real)
    angles = torch.outer(t, inv_freq)
    rot = torch.polar(torch.ones_like(angles), angles)
    xr = x.to(real)
    z = torch.complex(xr[..., :half], xr[..., half:]) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        n_kv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0:
            raise ValueError("embed_dim must be a multiple of num_heads")
        if n_kv < 1:
            raise ValueError("num_kv_heads must be at least 1")
        if num_heads % n_kv != 0:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        if (embed_dim // num_heads) % 2 != 0:
            raise ValueError("the head size must be even")
        self.num_heads = num_heads
        self.num_kv_heads = n_kv
        self.head_dim = embed_dim // num_heads
        self.rope_base = float(rope_base)
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, n_kv * self.head_dim, bias=False)
        self.W_v = nn.Linear(embed_dim, n_kv * self.head_dim, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        H, Hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        P = 0 if cache is None else cache[0].shape[2]
        q = self.W_q(x).reshape(B, T, H, d).transpose(1, 2)
        k = self.W_k(x).reshape(B, T, Hkv, d).transpose(1, 2)
        v = self.W_v(x).reshape(B, T, Hkv, d).transpose(1, 2)
        q = _rope_complex(q, P, self.rope_base)
        k = _rope_complex(k, P, self.rope_base)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        S = k.shape[2]

        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        G = H // Hkv
        kb = k.repeat_interleave(G, dim=1).reshape(B * H, S, d).to(work)
        vb = v.repeat_interleave(G, dim=1).reshape(B * H, S, d).to(work)
        qb = q.reshape(B * H, T, d).to(work)
        bias = torch.zeros(T, S, dtype=work, device=x.device)
        bias = bias.masked_fill(torch.ones(T, S, dtype=torch.bool, device=x.device).triu(P + 1), float("-inf"))
        scores = torch.baddbmm(bias.expand(B * H, T, S), qb, kb.transpose(1, 2), beta=1.0, alpha=1.0 / math.sqrt(d))
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(probs, vb).to(x.dtype).view(B, H, T, d).transpose(1, 2).reshape(B, T, E)
        return self.W_o(ctx), (k, v)
