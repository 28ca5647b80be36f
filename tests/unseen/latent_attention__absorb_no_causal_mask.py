"""BUG: the absorbed path assumes one decoding token and applies no causal mask, so with T > 1 new tokens see later new tokens.
STAGE: the absorbed path's mask (the softmax)
"""
import math
import torch
from torch import nn


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rotary(x, pos, base):
    d = x.shape[-1]
    cdt = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=cdt, device=x.device) / d))
    freqs = torch.outer(pos.to(cdt), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    xc = x.to(cdt)
    return (xc * emb.cos() + rotate_half(xc) * emb.sin()).to(x.dtype)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if min(num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v) < 1:
            raise ValueError("sizes must be >= 1")
        if head_dim_rope % 2 != 0:
            raise ValueError("head_dim_rope must be even")
        self.num_heads = num_heads
        self.kv_rank = kv_rank
        self.qk_nope_head_dim = head_dim_nope
        self.qk_rope_head_dim = head_dim_rope
        self.v_head_dim = head_dim_v
        self.rope_base = rope_base
        self.softmax_scale = (head_dim_nope + head_dim_rope) ** -0.5
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        bsz, q_len, _ = x.shape
        H, dn, dr, dv, r = (self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim,
                            self.v_head_dim, self.kv_rank)
        past = 0 if cache is None else cache[0].size(1)
        position_ids = torch.arange(past, past + q_len, device=x.device)

        q = self.W_q(x).view(bsz, q_len, H, dn + dr).transpose(1, 2)
        q_nope, q_pe = torch.split(q, [dn, dr], dim=-1)
        q_pe = apply_rotary(q_pe, position_ids, self.rope_base)

        compressed_kv = self.W_dkv(x)
        c_kv, k_pe = torch.split(compressed_kv, [r, dr], dim=-1)
        k_pe = apply_rotary(k_pe, position_ids, self.rope_base)
        if cache is not None:
            c_kv = torch.cat((cache[0], c_kv), dim=1)
            k_pe = torch.cat((cache[1], k_pe), dim=1)
        kv_len = c_kv.size(1)

        mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=x.device).tril(diagonal=past)

        if not absorb:
            kv = self.W_ukv(c_kv).view(bsz, kv_len, H, dn + dv).transpose(1, 2)
            k_nope, value_states = torch.split(kv, [dn, dv], dim=-1)
            attn = torch.matmul(q_nope, k_nope.transpose(2, 3))
            attn = attn + torch.matmul(q_pe, k_pe.unsqueeze(1).transpose(2, 3))
            attn = attn * self.softmax_scale
            attn = torch.where(mask, attn, torch.finfo(attn.dtype).min)
            attn = torch.softmax(attn, dim=-1)
            out = torch.matmul(attn, value_states)  # (B, H, T, dv)
        else:
            wkv_b = self.W_ukv.weight.view(H, dn + dv, r)
            w_uk = wkv_b[:, :dn, :]  # (H, dn, r)
            w_uv = wkv_b[:, dn:, :]  # (H, dv, r)
            # (H, B*T, dn) @ (H, dn, r) -> (H, B*T, r)
            qn = q_nope.permute(1, 0, 2, 3).reshape(H, bsz * q_len, dn)
            q_lat = torch.bmm(qn, w_uk).view(H, bsz, q_len, r).permute(1, 0, 2, 3)  # (B, H, T, r)
            q_lat = q_lat.reshape(bsz, H * q_len, r)
            qp = q_pe.reshape(bsz, H * q_len, dr)
            attn = torch.bmm(q_lat, c_kv.transpose(1, 2)) + torch.bmm(qp, k_pe.transpose(1, 2))
            attn = attn.view(bsz, H, q_len, kv_len) * self.softmax_scale
            attn = torch.softmax(attn, dim=-1)
            o_lat = torch.bmm(attn.view(bsz, H * q_len, kv_len), c_kv)  # (B, H*T, r)
            o_lat = o_lat.view(bsz, H, q_len, r).permute(1, 0, 2, 3).reshape(H, bsz * q_len, r)
            out = torch.bmm(o_lat, w_uv.transpose(1, 2))  # (H, B*T, dv)
            out = out.view(H, bsz, q_len, dv).permute(1, 0, 2, 3)
        out = out.transpose(1, 2).reshape(bsz, q_len, H * dv)
        return self.W_o(out), (c_kv, k_pe)
