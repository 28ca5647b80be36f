"""BUG: K/V heads are repeated with k.repeat(1, G, 1, 1) (tiling: kv0, kv1, kv0, kv1, ...) instead of repeat_interleave, so query head n uses key/value head n % Hkv instead of n // G. Differs on: 1 < Hkv < H (e.g. H=4, Hkv=2); MHA (Hkv = H) and MQA (Hkv = 1) are right.
STAGE: the repeated keys/values per query head -> scores of heads n with n % Hkv != n // G
STYLE: nanoGPT CausalSelfAttention extended to GQA with a manual (non-flash) attention path
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def apply_rotary(x, pos, base):
    d = x.shape[-1]
    dt = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    inv = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=dt) / d))
    ang = pos.to(dt)[:, None] * inv
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2].to(dt), x[..., d // 2:].to(dt)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        n_kv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads != 0 or n_kv < 1 or num_heads % n_kv != 0:
            raise ValueError("invalid head configuration")
        if (embed_dim // num_heads) % 2 != 0:
            raise ValueError("head size must be even")
        self.n_head, self.n_kv, self.n_embd = num_heads, n_kv, embed_dim
        self.hs = embed_dim // num_heads
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, n_kv * self.hs, bias=False)
        self.W_v = nn.Linear(embed_dim, n_kv * self.hs, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, C = x.size()
        P = 0 if cache is None else cache[0].size(2)
        q = self.W_q(x).view(B, T, self.n_head, self.hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_kv, self.hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_kv, self.hs).transpose(1, 2)
        pos = torch.arange(P, P + T, device=x.device)
        q, k = apply_rotary(q, pos, self.rope_base), apply_rotary(k, pos, self.rope_base)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        rep = self.n_head // self.n_kv
        kk, vv = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
        att = (q @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        bias = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(P)
        att = att.masked_fill(bias.logical_not(), float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ vv
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(y), (k, v)
