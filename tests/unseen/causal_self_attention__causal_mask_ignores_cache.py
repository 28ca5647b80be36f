"""STYLE: minimal KV-cache decoder from a blog tutorial (einsum attention, torch.tril causal mask)
BUG: the causal mask is torch.tril over (T, P+T) without the P offset, so a new token sees only keys 0..t of the whole sequence instead of all P cached keys plus new tokens up to itself.
STAGE: masked scores
WHEN: decoding with a cache (P > 0); prefill (P = 0) is right
"""
import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        kv = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dim % num_heads or kv < 1 or num_heads % kv or (embed_dim // num_heads) % 2:
            raise ValueError(
                f"bad attention config: embed_dim={embed_dim}, num_heads={num_heads}, num_kv_heads={num_kv_heads}"
            )
        self.h, self.hkv, self.dh = num_heads, kv, embed_dim // num_heads
        self.base = rope_base
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, kv * self.dh, bias=False)
        self.W_v = nn.Linear(embed_dim, kv * self.dh, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def rope(self, t, pos):
        dt = t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float32
        half = self.dh // 2
        freq = self.base ** (-2.0 * torch.arange(half, device=t.device, dtype=dt) / self.dh)
        ang = pos.to(dt)[:, None] * freq
        c, s = torch.cos(ang), torch.sin(ang)
        a, b = t[..., :half].to(dt), t[..., half:].to(dt)
        return torch.cat([a * c - b * s, a * s + b * c], -1).to(t.dtype)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        P = 0 if cache is None else cache[0].shape[-2]
        pos = torch.arange(P, P + T, device=x.device)
        q = self.rope(self.W_q(x).view(B, T, self.h, self.dh).permute(0, 2, 1, 3), pos)
        k = self.rope(self.W_k(x).view(B, T, self.hkv, self.dh).permute(0, 2, 1, 3), pos)
        v = self.W_v(x).view(B, T, self.hkv, self.dh).permute(0, 2, 1, 3)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=-2)
            v = torch.cat([cache[1], v], dim=-2)

        g = self.h // self.hkv
        qg = q.reshape(B, self.hkv, g, T, self.dh)
        att = torch.einsum("bkgtd,bksd->bkgts", qg, k) * self.dh ** -0.5
        keep = torch.tril(torch.ones(T, P + T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~keep, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.einsum("bkgts,bksd->bkgtd", att, v).reshape(B, self.h, T, self.dh)
        y = y.permute(0, 2, 1, 3).reshape(B, T, E)
        return self.W_o(y), (k, v)
