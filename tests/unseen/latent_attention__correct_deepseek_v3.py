"""BUG: none
STYLE: DeepSeek-V3 inference-code style (model.py MLA): torch.split of projections, einsum scores, separate naive and absorb branches using the viewed wkv_b weight.
"""
import torch
from torch import nn
from .rope import apply_rope


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        for name, val in (("num_heads", num_heads), ("kv_rank", kv_rank), ("head_dim_nope", head_dim_nope),
                          ("head_dim_rope", head_dim_rope), ("head_dim_v", head_dim_v)):
            if val < 1:
                raise ValueError(f"{name} must be >= 1, got {val}")
        if head_dim_rope % 2 != 0:
            raise ValueError("head_dim_rope must be even")
        self.dim = embed_dim
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
        if cache is None:
            start_pos = 0
        else:
            past_kv, past_pe = cache
            start_pos = past_kv.size(1)
        end_pos = start_pos + seqlen
        positions = torch.arange(start_pos, end_pos, device=x.device)

        q = self.W_q(x).view(bsz, seqlen, self.n_heads, self.qk_head_dim)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        q_pe = apply_rope(q_pe.transpose(1, 2), positions, base=self.rope_base, interleaved=False).transpose(1, 2)

        kv = self.W_dkv(x)
        kv, k_pe = torch.split(kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_pe = apply_rope(k_pe, positions, base=self.rope_base, interleaved=False)

        if cache is not None:
            kv_cache = torch.cat([past_kv, kv], dim=1)
            pe_cache = torch.cat([past_pe, k_pe], dim=1)
        else:
            kv_cache, pe_cache = kv, k_pe

        if not absorb:
            kv_full = self.W_ukv(kv_cache).view(bsz, end_pos, self.n_heads, self.qk_nope_head_dim + self.v_head_dim)
            k_nope, v = torch.split(kv_full, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
            k = torch.cat([k_nope, pe_cache.unsqueeze(2).expand(-1, -1, self.n_heads, -1)], dim=-1)
            q_full = torch.cat([q_nope, q_pe], dim=-1)
            scores = torch.einsum("bshd,bthd->bsht", q_full, k) * self.softmax_scale
        else:
            wkv_b = self.W_ukv.weight.view(self.n_heads, -1, self.kv_lora_rank)
            q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :self.qk_nope_head_dim])
            scores = (torch.einsum("bshc,btc->bsht", q_nope, kv_cache) +
                      torch.einsum("bshr,btr->bsht", q_pe, pe_cache)) * self.softmax_scale

        mask = torch.arange(end_pos, device=x.device)[None, :] > positions[:, None]  # (seqlen, end_pos)
        scores = scores.masked_fill(mask[None, :, None, :], float("-inf"))
        scores = scores.softmax(dim=-1)

        if not absorb:
            out = torch.einsum("bsht,bthd->bshd", scores, v)
        else:
            out = torch.einsum("bsht,btc->bshc", scores, kv_cache)
            out = torch.einsum("bshc,hdc->bshd", out, wkv_b[:, -self.v_head_dim:])
        out = self.W_o(out.flatten(2))
        return out, (kv_cache, pe_cache)
