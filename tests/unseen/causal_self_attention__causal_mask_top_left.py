"""BUG: the causal mask compares key index with query index within the call (j <= t, aligned to the top left) instead of with the absolute position P + t, so with a cache the new tokens cannot see most of it.
STAGE: the mask
"""
import torch
from torch import nn


def _rope_halves(x, pos, base):
    d = x.shape[-1]
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    i = torch.arange(d // 2, device=x.device, dtype=dt)
    inv = torch.pow(torch.tensor(base, dtype=dt, device=x.device), -2.0 * i / d)
    ang = pos.to(dt)[:, None] * inv
    c, s = ang.cos(), ang.sin()
    a, b = x.to(dt).unflatten(-1, (2, d // 2)).unbind(-2)
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        super().__init__()
        kv = num_heads if num_kv_heads is None else int(num_kv_heads)
        if embed_dim % num_heads != 0 or kv < 1 or num_heads % kv != 0:
            raise ValueError(
                f"bad head configuration: embed_dim={embed_dim}, num_heads={num_heads}, num_kv_heads={num_kv_heads}"
            )
        d = embed_dim // num_heads
        if d % 2 == 1:
            raise ValueError(f"head size {d} is odd; RoPE rotates pairs")
        self.E, self.H, self.Hkv, self.d = embed_dim, num_heads, kv, d
        self.base = float(rope_base)
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=False)
        self.W_k = nn.Linear(embed_dim, kv * d, bias=False)
        self.W_v = nn.Linear(embed_dim, kv * d, bias=False)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        H, Hkv, d = self.H, self.Hkv, self.d
        G = H // Hkv
        P = 0 if cache is None else cache[0].shape[2]
        pos = torch.arange(P, P + T, device=x.device)

        q = self.W_q(x).view(B, T, Hkv, G, d).permute(0, 2, 3, 1, 4)  # (B, Hkv, G, T, d)
        k_new = self.W_k(x).view(B, T, Hkv, d).transpose(1, 2)  # (B, Hkv, T, d)
        v_new = self.W_v(x).view(B, T, Hkv, d).transpose(1, 2)
        q = _rope_halves(q, pos, self.base)
        k_new = _rope_halves(k_new, pos, self.base)
        if cache is None:
            k, v = k_new, v_new
        else:
            k = torch.cat((cache[0], k_new), dim=2)
            v = torch.cat((cache[1], v_new), dim=2)
        S = k.shape[2]

        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        scores = torch.einsum("bhgtd,bhsd->bhgts", q.to(work), k.to(work)) * d ** -0.5
        allowed = torch.arange(S, device=x.device)[None, :] <= torch.arange(T, device=x.device)[:, None]
        scores = torch.where(allowed, scores, torch.finfo(work).min)
        probs = scores.softmax(dim=-1)
        ctx = torch.einsum("bhgts,bhsd->bthgd", probs, v.to(work)).to(x.dtype)
        out = self.W_o(ctx.reshape(B, T, H * d))
        return out, (k, v)
