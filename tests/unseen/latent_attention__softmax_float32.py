"""BUG: softmax(dtype=float32) as DeepSeek does: float32 rounding in a float64 call
STYLE: DeepSeek-V3
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _rope_half(x, pos, base):
    d = x.shape[-1]
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv = torch.pow(torch.tensor(base, dtype=wide, device=x.device),
                    -torch.arange(0, d // 2, dtype=wide, device=x.device) * 2.0 / d)
    ang = pos.to(wide)[:, None] * inv                                      # (T, d/2)
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v,
                 rope_base=10000.0):
        super().__init__()
        if min(num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v) < 1:
            raise ValueError("all sizes must be >= 1")
        if head_dim_rope % 2 != 0:
            raise ValueError("head_dim_rope must be even")
        self.H, self.r = num_heads, kv_rank
        self.dn, self.dr, self.dv = head_dim_nope, head_dim_rope, head_dim_v
        self.base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        B, T, _ = x.shape
        H, r, dn, dr, dv = self.H, self.r, self.dn, self.dr, self.dv
        P = 0 if cache is None else cache[0].shape[1]
        pos = torch.arange(P, P + T, device=x.device)
        ckr = self.W_dkv(x)
        c_new, kr_new = ckr[..., :r], _rope_half(ckr[..., r:], pos, self.base)
        c_all = c_new if cache is None else torch.cat([cache[0], c_new], 1)         # (B, S, r)
        kr_all = kr_new if cache is None else torch.cat([cache[1], kr_new], 1)      # (B, S, dr)
        S = P + T
        causal = torch.arange(S, device=x.device)[None, :] <= pos[:, None]           # (T, S)
        q_all = self.W_q(x)
        Wukv = self.W_ukv.weight                                                      # (H*(dn+dv), r)
        scale = 1.0 / math.sqrt(dn + dr)
        heads = []
        for n in range(H):
            qn = q_all[..., n * (dn + dr):(n + 1) * (dn + dr)]
            q_nope, q_rope = qn[..., :dn], _rope_half(qn[..., dn:], pos, self.base)
            W_uk = Wukv[n * (dn + dv): n * (dn + dv) + dn]                             # (dn, r)
            W_uv = Wukv[n * (dn + dv) + dn:(n + 1) * (dn + dv)]                        # (dv, r)
            if absorb:
                s = (q_nope @ W_uk) @ c_all.transpose(1, 2)
            else:
                s = q_nope @ F.linear(c_all, W_uk).transpose(1, 2)
            s = (s + q_rope @ kr_all.transpose(1, 2)) * scale
            p = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1, dtype=torch.float32).type_as(s)
            if absorb:
                heads.append(F.linear(p @ c_all, W_uv))
            else:
                heads.append(p @ F.linear(c_all, W_uv))
        return self.W_o(torch.cat(heads, dim=-1)), (c_all, kr_all)
