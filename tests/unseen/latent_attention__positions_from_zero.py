"""BUG: RoPE positions always 0..T-1 for the new tokens, ignoring the cache length P.
STAGE: the catalogue's positions_not_offset
"""
import math
import torch
from torch import nn


def _rope(x, positions, base):
    d = x.shape[-1]
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=dt) / d)
    ang = positions.to(dt)[:, None] * inv[None, :]  # (T, d/2)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2].to(dt), x[..., d // 2 :].to(dt)
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.to(x.dtype)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        for name, v in (("num_heads", num_heads), ("kv_rank", kv_rank), ("head_dim_nope", head_dim_nope),
                        ("head_dim_rope", head_dim_rope), ("head_dim_v", head_dim_v)):
            if v < 1:
                raise ValueError(f"{name} must be >= 1")
        if head_dim_rope % 2:
            raise ValueError("head_dim_rope must be even")
        self.E, self.H, self.r = embed_dim, num_heads, kv_rank
        self.dn, self.dr, self.dv = head_dim_nope, head_dim_rope, head_dim_v
        self.rope_base = rope_base
        H, dn, dr, dv, r = num_heads, head_dim_nope, head_dim_rope, head_dim_v, kv_rank
        self.W_q = nn.Linear(embed_dim, H * (dn + dr), bias=False)
        self.W_dkv = nn.Linear(embed_dim, r + dr, bias=False)
        self.W_ukv = nn.Linear(r, H * (dn + dv), bias=False)
        self.W_o = nn.Linear(H * dv, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        B, T, _ = x.shape
        H, dn, dr, dv, r = self.H, self.dn, self.dr, self.dv, self.r
        P = 0 if cache is None else cache[0].shape[1]
        pos = torch.arange(T, device=x.device)
        allowed = torch.arange(P + T, device=x.device)[None, :] <= (pos + P)[:, None]

        q = self.W_q(x).view(B, T, H, dn + dr)
        q_nope, q_rope = q[..., :dn], q[..., dn:]
        q_rope = _rope(q_rope.transpose(1, 2), pos, self.rope_base)  # (B, H, T, dr)
        q_nope = q_nope.transpose(1, 2)  # (B, H, T, dn)

        ckv = self.W_dkv(x)
        c_new, kr_new = ckv[..., :r], _rope(ckv[..., r:], pos, self.rope_base)
        if cache is None:
            c_all, kr_all = c_new, kr_new
        else:
            c_all = torch.cat([cache[0], c_new], dim=1)
            kr_all = torch.cat([cache[1], kr_new], dim=1)
        S = P + T
        scale = 1.0 / math.sqrt(dn + dr)

        if not absorb:
            kv = self.W_ukv(c_all).view(B, S, H, dn + dv).transpose(1, 2)  # (B, H, S, dn+dv)
            k_nope, v = kv[..., :dn], kv[..., dn:]
            k = torch.cat([k_nope, kr_all[:, None].expand(B, H, S, dr)], dim=-1)
            qq = torch.cat([q_nope, q_rope], dim=-1)
            scores = torch.einsum("bhtd,bhsd->bhts", qq, k) * scale
            scores = scores.masked_fill(~allowed, float("-inf"))
            w = torch.softmax(scores, dim=-1)
            o = torch.einsum("bhts,bhsv->bhtv", w, v)
        else:
            Wukv = self.W_ukv.weight.view(H, dn + dv, r)
            W_uk, W_uv = Wukv[:, :dn], Wukv[:, dn:]
            q_lat = torch.einsum("bhtd,hdr->bhtr", q_nope, W_uk)
            scores = torch.einsum("bhtr,bsr->bhts", q_lat, c_all)
            scores = scores + torch.einsum("bhtd,bsd->bhts", q_rope, kr_all)
            scores = (scores * scale).masked_fill(~allowed, float("-inf"))
            w = torch.softmax(scores, dim=-1)
            o_lat = torch.einsum("bhts,bsr->bhtr", w, c_all)
            o = torch.einsum("bhtr,hvr->bhtv", o_lat, W_uv)
        out = self.W_o(o.transpose(1, 2).reshape(B, T, H * dv))
        return out, (c_all, kr_all)
