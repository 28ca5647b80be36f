"""BUG: the returned cache holds the new k_rope before rotation (attention itself uses the rotated one), so later calls see unrotated keys.
STAGE: what is stored in the returned cache
"""
import math

import torch
from torch import nn
from .rope import apply_rope


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if num_heads < 1 or kv_rank < 1 or head_dim_nope < 1 or head_dim_rope < 1 or head_dim_v < 1:
            raise ValueError("sizes must be >= 1")
        if head_dim_rope % 2 == 1:
            raise ValueError("head_dim_rope must be even")
        self.H, self.r = num_heads, kv_rank
        self.dn, self.dr, self.dv = head_dim_nope, head_dim_rope, head_dim_v
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        B, T, _ = x.shape
        dn, dr, dv, r = self.dn, self.dr, self.dv, self.r
        P = 0 if cache is None else cache[0].shape[1]
        pos = torch.arange(P, P + T, device=x.device)

        q_all = self.W_q(x)
        dkv = self.W_dkv(x)
        c_new = dkv[..., :r]
        kr_raw = dkv[..., r:]
        kr_new = apply_rope(kr_raw, pos, base=self.rope_base, interleaved=False)
        if cache is None:
            c, kr, kr_store = c_new, kr_new, kr_raw
        else:
            c = torch.cat([cache[0], c_new], dim=1)
            kr = torch.cat([cache[1], kr_new], dim=1)
            kr_store = torch.cat([cache[1], kr_raw], dim=1)
        S = P + T
        allowed = torch.arange(S, device=x.device)[None, :] <= pos[:, None]  # (T, S)
        scale = 1.0 / math.sqrt(dn + dr)

        outs = []
        for n in range(self.H):
            qn = q_all[..., n * (dn + dr):(n + 1) * (dn + dr)]
            q_nope = qn[..., :dn]
            q_rope = apply_rope(qn[..., dn:], pos, base=self.rope_base, interleaved=False)
            w = self.W_ukv.weight[n * (dn + dv):(n + 1) * (dn + dv)]  # (dn+dv, r)
            w_k, w_v = w[:dn], w[dn:]
            if absorb:
                q_lat = q_nope @ w_k  # (B, T, r)
                scores = q_lat @ c.transpose(1, 2) + q_rope @ kr.transpose(1, 2)
            else:
                k_nope = c @ w_k.t()  # (B, S, dn)
                v = c @ w_v.t()  # (B, S, dv)
                k = torch.cat([k_nope, kr], dim=-1)
                scores = torch.cat([q_nope, q_rope], dim=-1) @ k.transpose(1, 2)
            scores = (scores * scale).masked_fill(~allowed, float("-inf"))
            p = torch.softmax(scores, dim=-1)
            if absorb:
                o = (p @ c) @ w_v.t()
            else:
                o = p @ v
            outs.append(o)
        return self.W_o(torch.cat(outs, dim=-1)), (c, kr_store)
