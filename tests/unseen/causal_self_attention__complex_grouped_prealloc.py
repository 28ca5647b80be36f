"""BUG: none
STYLE: rotate-half RoPE as a complex product, a frozen dataclass of sizes, a preallocated cache, grouped einsum
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class _Dims:
    E: int
    H: int
    Hkv: int

    @property
    def d(self):
        return self.E // self.H

    @property
    def G(self):
        return self.H // self.Hkv


def _rope(x, positions, base):
    """rotate-half RoPE as a complex product: pair i = (x[i], x[i + d/2]) -> x[i] + 1j x[i + d/2]."""
    half = x.shape[-1] // 2
    rdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    theta = base ** (-2.0 * torch.arange(half, dtype=rdt, device=x.device) / x.shape[-1])
    ang = positions.to(rdt)[:, None] * theta[None, :]                 # (T, half)
    rot = torch.polar(torch.ones_like(ang), ang)
    z = torch.complex(x[..., :half].to(rdt), x[..., half:].to(rdt)) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        Hkv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads:
            raise ValueError("embed_dim % num_heads != 0")
        if Hkv < 1:
            raise ValueError("num_kv_heads must be >= 1")
        if num_heads % Hkv:
            raise ValueError("num_heads % num_kv_heads != 0")
        if (embed_dim // num_heads) % 2:
            raise ValueError("head size must be even")
        self.dims = _Dims(embed_dim, num_heads, Hkv)
        d = self.dims.d
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, Hkv * d, bias=False)
        self.W_v = nn.Linear(embed_dim, Hkv * d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)
        self.rope_base = float(rope_base)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        H, Hkv, d, G = self.dims.H, self.dims.Hkv, self.dims.d, self.dims.G
        P = 0 if cache is None else cache[0].size(2)
        pos = torch.arange(P, P + T, device=x.device)
        q = _rope(self.W_q(x).view(B, T, H, d).permute(0, 2, 1, 3), pos, self.rope_base)
        k_new = _rope(self.W_k(x).view(B, T, Hkv, d).permute(0, 2, 1, 3), pos, self.rope_base)
        v_new = self.W_v(x).view(B, T, Hkv, d).permute(0, 2, 1, 3)

        k = k_new.new_empty(B, Hkv, P + T, d)
        v = v_new.new_empty(B, Hkv, P + T, d)
        if P:
            k[:, :, :P] = cache[0]
            v[:, :, :P] = cache[1]
        k[:, :, P:] = k_new
        v[:, :, P:] = v_new

        qg = q.reshape(B, Hkv, G, T, d)
        s = torch.einsum("bhgtd,bhsd->bhgts", qg, k) / math.sqrt(d)
        allowed = torch.arange(P + T, device=x.device)[None, :] <= pos[:, None]   # (T, P+T)
        s = torch.where(allowed, s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
        a = torch.softmax(s, dim=-1)                     # every query sees at least itself
        o = torch.einsum("bhgts,bhsd->bhgtd", a, v).reshape(B, H, T, d)
        return self.W_o(o.transpose(1, 2).reshape(B, T, E)), (k, v)
