"""DeepSeek-V2's layout written with einsum; absorbed mode as in its inference code (q_nope through W_uk, then the
latent weighted sum through W_uv)."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .rope import apply_rope


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if num_heads < 1 or kv_rank < 1 or head_dim_nope < 1 or head_dim_v < 1 or head_dim_rope < 2 \
                or head_dim_rope % 2:
            raise ValueError("bad MLA sizes")
        self.n_heads, self.kv_lora_rank = num_heads, kv_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = head_dim_nope, head_dim_rope, head_dim_v
        self.softmax_scale = 1 / math.sqrt(head_dim_nope + head_dim_rope)
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        bsz, seqlen, _ = x.shape
        start = 0 if cache is None else cache[0].size(1)
        pos = torch.arange(start, start + seqlen, device=x.device)
        q = self.W_q(x).view(bsz, seqlen, self.n_heads, -1)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        q_pe = apply_rope(q_pe.transpose(1, 2), pos, base=self.rope_base).transpose(1, 2)  # (b, s, h, dr)
        kv, k_pe = torch.split(self.W_dkv(x), [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_pe = apply_rope(k_pe, pos, base=self.rope_base)
        if cache is not None:
            kv, k_pe = torch.cat((cache[0], kv), 1), torch.cat((cache[1], k_pe), 1)
        wkv_b = self.W_ukv.weight.view(self.n_heads, -1, self.kv_lora_rank)
        w_uk, w_uv = wkv_b[:, :self.qk_nope_head_dim], wkv_b[:, self.qk_nope_head_dim:]
        if absorb:
            q_lat = torch.einsum("bshd,hdc->bshc", q_nope, w_uk)
            scores = torch.einsum("bshc,btc->bsht", q_lat, kv) + torch.einsum("bshr,btr->bsht", q_pe, k_pe)
        else:
            k_nope = torch.einsum("btc,hdc->bthd", kv, w_uk)
            scores = torch.einsum("bshd,bthd->bsht", q_nope, k_nope) + torch.einsum("bshr,btr->bsht", q_pe, k_pe)
        scores = scores * self.softmax_scale
        causal = torch.arange(kv.size(1), device=x.device)[None, :] > pos[:, None]  # (s, t)
        scores = scores.masked_fill(causal[None, :, None, :], float("-inf"))
        p = F.softmax(scores, dim=-1)
        if absorb:
            o = torch.einsum("bsht,btc->bshc", p, kv)
            o = torch.einsum("bshc,hdc->bshd", o, w_uv)
        else:
            v = torch.einsum("btc,hdc->bthd", kv, w_uv)
            o = torch.einsum("bsht,bthd->bshd", p, v)
        return self.W_o(o.flatten(2)), (kv, k_pe)
