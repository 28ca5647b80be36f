"""BUG: each head's W_q slice is split rope-first ([q_rope ; q_nope]) instead of [q_nope ; q_rope]: the wrong features are rotated and paired with k_nope; differs on every input.
STAGE: the query (its nope/rope split)
STYLE: DeepSeek-V3 inference model.py port (einsum naive/absorb paths)
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def apply_rotary_emb(x, pos, base):
    # x (..., S, ..., d) handled by caller: x is (b, s, [h,] d), pos (s,)
    half = x.shape[-1] // 2
    adt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    freqs = base ** (-torch.arange(half, device=x.device, dtype=adt) * 2.0 / x.shape[-1])
    ang = pos.to(adt)[:, None] * freqs
    if x.dim() == 4:
        ang = ang[:, None, :]
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., :half].to(adt), x[..., half:].to(adt)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        for name, val in (("num_heads", num_heads), ("kv_rank", kv_rank), ("head_dim_nope", head_dim_nope),
                          ("head_dim_rope", head_dim_rope), ("head_dim_v", head_dim_v)):
            if val < 1:
                raise ValueError(f"{name} must be >= 1")
        if head_dim_rope % 2 != 0:
            raise ValueError("head_dim_rope must be even")
        self.n_heads = num_heads
        self.kv_lora_rank = kv_rank
        self.qk_nope_head_dim = head_dim_nope
        self.qk_rope_head_dim = head_dim_rope
        self.qk_head_dim = head_dim_nope + head_dim_rope
        self.v_head_dim = head_dim_v
        self.rope_base = rope_base
        self.softmax_scale = self.qk_head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, num_heads * self.qk_head_dim, bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        bsz, seqlen, _ = x.size()
        start_pos = 0 if cache is None else cache[0].size(1)
        end_pos = start_pos + seqlen
        pos = torch.arange(start_pos, end_pos, device=x.device)
        q = self.W_q(x).view(bsz, seqlen, self.n_heads, self.qk_head_dim)
        q_pe, q_nope = torch.split(q, [self.qk_rope_head_dim, self.qk_nope_head_dim], dim=-1)
        q_pe = apply_rotary_emb(q_pe, pos, self.rope_base)
        kv = self.W_dkv(x)
        kv, k_pe = torch.split(kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_pe = apply_rotary_emb(k_pe, pos, self.rope_base)
        if cache is not None:
            kv_cache = torch.cat([cache[0], kv], dim=1)
            pe_cache = torch.cat([cache[1], k_pe], dim=1)
        else:
            kv_cache, pe_cache = kv, k_pe
        mask = torch.full((seqlen, end_pos), float("-inf"), device=x.device).triu_(start_pos + 1).to(x.dtype)
        if not absorb:
            kvb = self.W_ukv(kv_cache).view(bsz, end_pos, self.n_heads, self.qk_nope_head_dim + self.v_head_dim)
            k_nope, v = torch.split(kvb, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
            k = torch.cat([k_nope, pe_cache.unsqueeze(2).expand(-1, -1, self.n_heads, -1)], dim=-1)
            qf = torch.cat([q_nope, q_pe], dim=-1)
            scores = torch.einsum("bshd,bthd->bsht", qf, k) * self.softmax_scale
            scores = scores + mask.unsqueeze(1)
            scores = scores.softmax(dim=-1)
            out = torch.einsum("bsht,bthd->bshd", scores, v)
        else:
            wkv_b = self.W_ukv.weight.view(self.n_heads, -1, self.kv_lora_rank)
            q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, : self.qk_nope_head_dim])
            scores = (torch.einsum("bshc,btc->bsht", q_nope, kv_cache) +
                      torch.einsum("bshr,btr->bsht", q_pe, pe_cache)) * self.softmax_scale
            scores = scores + mask.unsqueeze(1)
            scores = scores.softmax(dim=-1)
            out = torch.einsum("bsht,btc->bshc", scores, kv_cache)
            out = torch.einsum("bshc,hdc->bshd", out, wkv_b[:, -self.v_head_dim:])
        out = self.W_o(out.flatten(2))
        return out, (kv_cache, pe_cache)
