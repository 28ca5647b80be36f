"""BUG: none
STYLE: DeepSeek-V3 model.py's naive and absorb paths (wkv_b.view(H, -1, r)), rotate-half RoPE
"""
"""MLA after DeepSeek-V3's inference model.py (attn_impl 'naive' / 'absorb'), without q compression
and kv_norm, rotate-half RoPE, and a (c_kv, k_pe) tuple cache instead of fixed buffers."""
import math

import torch
from torch import nn


def precompute_cos_sin(dim, start, end, base, dtype, device):
    dt = dtype if dtype in (torch.float32, torch.float64) else torch.float32
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=dt, device=device) / dim))
    t = torch.arange(start, end, dtype=dt, device=device)
    freqs = torch.outer(t, freqs)                     # (T, dim/2)
    return freqs.cos(), freqs.sin()


def apply_rotary_emb(x, cos, sin):
    """x (B, T, ..., dim), rotate-half pairs (i, i + dim/2); cos/sin (T, dim/2)."""
    shape = (1, cos.size(0)) + (1,) * (x.dim() - 3) + (cos.size(1),)
    cos, sin = cos.view(shape), sin.view(shape)
    x1, x2 = x.to(cos.dtype).chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v,
                 rope_base=10000.0):
        super().__init__()
        for name, val in (("num_heads", num_heads), ("kv_rank", kv_rank), ("head_dim_nope", head_dim_nope),
                          ("head_dim_rope", head_dim_rope), ("head_dim_v", head_dim_v)):
            if val < 1:
                raise ValueError(f"{name} must be >= 1")
        if head_dim_rope % 2:
            raise ValueError("head_dim_rope must be even")
        self.dim = embed_dim
        self.n_heads = num_heads
        self.kv_lora_rank = kv_rank
        self.qk_nope_head_dim = head_dim_nope
        self.qk_rope_head_dim = head_dim_rope
        self.qk_head_dim = head_dim_nope + head_dim_rope
        self.v_head_dim = head_dim_v
        self.rope_base = rope_base
        self.W_q = nn.Linear(self.dim, self.n_heads * self.qk_head_dim, bias=False)
        self.W_dkv = nn.Linear(self.dim, self.kv_lora_rank + self.qk_rope_head_dim, bias=False)
        self.W_ukv = nn.Linear(self.kv_lora_rank, self.n_heads * (self.qk_nope_head_dim + self.v_head_dim), bias=False)
        self.W_o = nn.Linear(self.n_heads * self.v_head_dim, self.dim, bias=False)
        self.softmax_scale = self.qk_head_dim ** -0.5

    def forward(self, x, cache=None, absorb=False):
        bsz, seqlen, _ = x.size()
        start_pos = 0 if cache is None else cache[0].size(1)
        end_pos = start_pos + seqlen
        q = self.W_q(x).view(bsz, seqlen, self.n_heads, self.qk_head_dim)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        cos, sin = precompute_cos_sin(self.qk_rope_head_dim, start_pos, end_pos, self.rope_base, x.dtype, x.device)
        q_pe = apply_rotary_emb(q_pe, cos, sin)
        kv = self.W_dkv(x)
        kv, k_pe = torch.split(kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_pe = apply_rotary_emb(k_pe, cos, sin)
        if cache is not None:
            kv = torch.cat([cache[0], kv], dim=1)
            k_pe = torch.cat([cache[1], k_pe], dim=1)
        new_cache = (kv, k_pe)

        mask = torch.arange(end_pos, device=x.device)[None, :] > torch.arange(start_pos, end_pos, device=x.device)[:, None]
        if not absorb:
            kvu = self.W_ukv(kv).view(bsz, end_pos, self.n_heads, self.qk_nope_head_dim + self.v_head_dim)
            k_nope, v = torch.split(kvu, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
            k = torch.cat([k_nope, k_pe.unsqueeze(2).expand(-1, -1, self.n_heads, -1)], dim=-1)
            qf = torch.cat([q_nope, q_pe], dim=-1)
            scores = torch.einsum("bshd,bthd->bsht", qf, k) * self.softmax_scale
        else:
            wkv_b = self.W_ukv.weight.view(self.n_heads, -1, self.kv_lora_rank)
            q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :self.qk_nope_head_dim])
            scores = (torch.einsum("bshc,btc->bsht", q_nope, kv) +
                      torch.einsum("bshr,btr->bsht", q_pe, k_pe)) * self.softmax_scale
        scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))
        acc = torch.promote_types(x.dtype, torch.float32)
        scores = scores.softmax(dim=-1, dtype=acc).type_as(x)
        if not absorb:
            x = torch.einsum("bsht,bthd->bshd", scores, v)
        else:
            x = torch.einsum("bsht,btc->bshc", scores, kv)
            x = torch.einsum("bshc,hdc->bshd", x, wkv_b[:, -self.v_head_dim:])
        x = self.W_o(x.flatten(2))
        return x, new_cache
