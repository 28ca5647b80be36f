"""BUG: none
STYLE: grouped einsum GQA without materialising repeated K/V (queries viewed as (B, Hkv, G, T, d)), RoPE with complex numbers on the rotate-half pairing, boolean causal mask with torch.where, log-sum-exp softmax by hand
"""
import math

import torch
from torch import nn


def _rope_complex(x, positions, base):
    d = x.shape[-1]
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    freqs = base ** (-torch.arange(0, d, 2, device=x.device, dtype=dt) / d)
    ang = positions.to(dt)[:, None] * freqs
    rot = torch.polar(torch.ones_like(ang), ang)
    xc = torch.complex(x[..., : d // 2].to(dt), x[..., d // 2:].to(dt)) * rot
    return torch.cat((xc.real, xc.imag), dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        kv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads or kv < 1 or num_heads % kv or (embed_dim // num_heads) % 2:
            raise ValueError(f"bad config: embed_dim={embed_dim}, num_heads={num_heads}, num_kv_heads={num_kv_heads}")
        self.E, self.H, self.Hkv = embed_dim, num_heads, kv
        self.d = embed_dim // num_heads
        self.base = float(rope_base)
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, kv * self.d, bias=False)
        self.W_v = nn.Linear(embed_dim, kv * self.d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        H, Hkv, d = self.H, self.Hkv, self.d
        G = H // Hkv
        P = 0 if cache is None else cache[0].shape[-2]
        pos = torch.arange(P, P + T, device=x.device)
        q = _rope_complex(self.W_q(x).view(B, T, H, d).permute(0, 2, 1, 3), pos, self.base)
        k = _rope_complex(self.W_k(x).view(B, T, Hkv, d).permute(0, 2, 1, 3), pos, self.base)
        v = self.W_v(x).view(B, T, Hkv, d).permute(0, 2, 1, 3)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        S = P + T
        qg = q.reshape(B, Hkv, G, T, d)
        s = torch.einsum("bkgtd,bksd->bkgts", qg, k) / math.sqrt(d)
        allowed = torch.arange(S, device=x.device)[None, :] <= (torch.arange(T, device=x.device)[:, None] + P)
        s = torch.where(allowed, s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
        cdt = torch.float32 if s.dtype in (torch.float16, torch.bfloat16) else s.dtype
        s = s.to(cdt)
        m = s.amax(-1, keepdim=True).detach()          # every row has its own key: finite
        lse = m + torch.log(torch.exp(s - m).sum(-1, keepdim=True))
        w = torch.exp(s - lse).to(v.dtype)
        o = torch.einsum("bkgts,bksd->bkgtd", w, v).reshape(B, H, T, d)
        o = o.permute(0, 2, 1, 3).reshape(B, T, H * d)
        return self.W_o(o), (k, v)
