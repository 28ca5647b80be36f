"""BUG: none
STYLE: course solution: explicit loop over heads with per-head weight slices, float64 internal math (cast back at the end), boolean causal mask with torch.where; absorbed mode per head (dn x r block of W_ukv)
"""
import math

import torch
import torch.nn as nn


def _rope_rotate_half(x, positions, base):
    d = x.shape[-1]
    h = d // 2
    i = torch.arange(h, dtype=torch.float64, device=x.device)
    theta = positions.to(torch.float64)[:, None] * torch.pow(torch.tensor(float(base), dtype=torch.float64, device=x.device), -2.0 * i / d)
    c, s = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if min(num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v) < 1:
            raise ValueError("sizes must be >= 1")
        if head_dim_rope % 2 == 1:
            raise ValueError("head_dim_rope must be even")
        self.H, self.r, self.dn, self.dr, self.dv = num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v
        self.base = float(rope_base)
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        B, T, _ = x.shape
        H, r, dn, dr, dv = self.H, self.r, self.dn, self.dr, self.dv
        f64 = torch.float64
        P = cache[0].shape[1] if cache is not None else 0
        positions = torch.arange(P, P + T, device=x.device)
        xd = x.to(f64)
        Wq = self.W_q.weight.to(f64)
        Wdkv = self.W_dkv.weight.to(f64)
        Wukv = self.W_ukv.weight.to(f64)
        lat = xd @ Wdkv.t()
        c_new = lat[..., :r]
        kr_new = _rope_rotate_half(lat[..., r:], positions, self.base)
        if cache is None:
            c_all, kr_all = c_new, kr_new
        else:
            c_all = torch.cat([cache[0].to(f64), c_new], dim=1)
            kr_all = torch.cat([cache[1].to(f64), kr_new], dim=1)
        S = P + T
        allowed = torch.arange(S, device=x.device)[None, :] <= positions[:, None]
        scale = 1.0 / math.sqrt(dn + dr)
        heads = []
        for n in range(H):
            wq_n = Wq[n * (dn + dr):(n + 1) * (dn + dr)]
            q_nope = xd @ wq_n[:dn].t()
            q_rope = _rope_rotate_half(xd @ wq_n[dn:].t(), positions, self.base)
            w_n = Wukv[n * (dn + dv):(n + 1) * (dn + dv)]
            w_uk, w_uv = w_n[:dn], w_n[dn:]
            if absorb:
                q_lat = q_nope @ w_uk  # (B, T, r)
                s = q_lat @ c_all.transpose(1, 2)
            else:
                k_nope = c_all @ w_uk.t()  # (B, S, dn)
                s = q_nope @ k_nope.transpose(1, 2)
            s = (s + q_rope @ kr_all.transpose(1, 2)) * scale
            s = torch.where(allowed, s, torch.tensor(float("-inf"), dtype=f64, device=x.device))
            p = torch.softmax(s, dim=-1)
            if absorb:
                heads.append((p @ c_all) @ w_uv.t())
            else:
                heads.append(p @ (c_all @ w_uv.t()))
        o = torch.cat(heads, dim=-1).to(x.dtype)
        out = self.W_o(o)
        c_ret = c_all.to(x.dtype) if cache is None else torch.cat([cache[0], c_new.to(cache[0].dtype)], dim=1)
        kr_ret = kr_all.to(x.dtype) if cache is None else torch.cat([cache[1], kr_new.to(cache[1].dtype)], dim=1)
        return out, (c_ret, kr_ret)
