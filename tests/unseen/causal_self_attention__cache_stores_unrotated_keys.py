"""BUG: the cache keeps the keys before RoPE and all S keys are re-rotated at 0..S-1 each call; outputs chain with its own caches, but the returned k is unrotated (and a contract cache gets rotated twice).
STAGE: the returned cache
"""
import math

import torch
from torch import nn


def _rope(x, positions, base):
    d = x.shape[-1]
    half = d // 2
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv = torch.pow(float(base), -torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d).to(dt)
    theta = torch.einsum("t,f->tf", positions.to(dt), inv)
    c, s = theta.cos(), theta.sin()
    xw = x.to(dt)
    x1, x2 = xw[..., :half], xw[..., half:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        if num_kv_heads is None:
            num_kv_heads = num_heads
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError("num_kv_heads must be >= 1 and divide num_heads")
        self.h, self.hkv, self.d = num_heads, num_kv_heads, embed_dim // num_heads
        if self.d % 2:
            raise ValueError("RoPE needs an even head size")
        self.base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, self.hkv * self.d, bias=False)
        self.W_v = nn.Linear(embed_dim, self.hkv * self.d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        h, hkv, d = self.h, self.hkv, self.d
        q = self.W_q(x).unflatten(-1, (h, d)).transpose(1, 2)
        k = self.W_k(x).unflatten(-1, (hkv, d)).transpose(1, 2)
        v = self.W_v(x).unflatten(-1, (hkv, d)).transpose(1, 2)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        S = k.shape[2]
        P = S - T
        key_pos = torch.arange(S, device=x.device)
        q_rot = _rope(q, key_pos[P:], self.base)
        k_rot = _rope(k, key_pos, self.base)

        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        k_rep = k_rot.repeat_interleave(h // hkv, dim=1).to(work)
        v_rep = v.repeat_interleave(h // hkv, dim=1).to(work)
        att = q_rot.to(work) @ k_rep.transpose(-1, -2) / math.sqrt(d)
        att = att.masked_fill(key_pos[None, :] > key_pos[P:, None], float("-inf"))
        y = (att.softmax(-1) @ v_rep).to(x.dtype)
        return self.W_o(y.transpose(1, 2).reshape(B, T, E)), (k, v)
