"""BUG: absorb=True still expands the whole latent cache through W_ukv into per-head keys (only the value side is folded): values are right, but B*S*H*(dn+dv) elements break the absorbed memory bound (decode T=1, P=96).
STAGE: none in values; the keys (materialised per head)
STYLE: HF DeepseekV2Attention with a half-done weight absorption
"""
import math

import torch
import torch.nn as nn


def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _rope(x, position_ids, base):
    # x (..., T, d); position_ids (T,)
    d = x.shape[-1]
    adt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=adt) / d))
    freqs = position_ids.to(adt)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    xf = x.to(adt)
    return (xf * cos + _rotate_half(xf) * sin).to(x.dtype)


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if num_heads < 1 or kv_rank < 1 or head_dim_nope < 1 or head_dim_rope < 1 or head_dim_v < 1:
            raise ValueError("num_heads, kv_rank and the head dims must be >= 1")
        if head_dim_rope % 2:
            raise ValueError("head_dim_rope must be even")
        self.embed_dim, self.num_heads, self.kv_lora_rank = embed_dim, num_heads, kv_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = head_dim_nope, head_dim_rope, head_dim_v
        self.q_head_dim = head_dim_nope + head_dim_rope
        self.rope_theta = rope_base
        self.softmax_scale = self.q_head_dim ** -0.5
        self.W_q = nn.Linear(embed_dim, num_heads * self.q_head_dim, bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        bsz, q_len, _ = x.shape
        H, dn, dr, dv, r = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim, self.kv_lora_rank
        P = 0 if cache is None else cache[0].shape[1]
        position_ids = torch.arange(P, P + q_len, device=x.device)
        q = self.W_q(x).view(bsz, q_len, H, self.q_head_dim).transpose(1, 2)
        q_nope, q_pe = torch.split(q, [dn, dr], dim=-1)
        compressed_kv = self.W_dkv(x)
        c_new, k_pe = torch.split(compressed_kv, [r, dr], dim=-1)
        q_pe = _rope(q_pe, position_ids, self.rope_theta)
        k_pe = _rope(k_pe, position_ids, self.rope_theta)
        if cache is not None:
            c_kv = torch.cat([cache[0], c_new], dim=1)
            k_rope = torch.cat([cache[1], k_pe], dim=1)
        else:
            c_kv, k_rope = c_new, k_pe
        S = c_kv.shape[1]
        causal = torch.full((q_len, S), float("-inf"), device=x.device, dtype=x.dtype).triu(P + 1)
        if not absorb:
            kv = self.W_ukv(c_kv).view(bsz, S, H, dn + dv).transpose(1, 2)
            k_nope, value_states = torch.split(kv, [dn, dv], dim=-1)
            query_states = q_pe.new_empty(bsz, H, q_len, self.q_head_dim)
            query_states[:, :, :, :dn] = q_nope
            query_states[:, :, :, dn:] = q_pe
            key_states = k_pe.new_empty(bsz, H, S, self.q_head_dim)
            key_states[:, :, :, :dn] = k_nope
            key_states[:, :, :, dn:] = k_rope[:, None]
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.softmax_scale
            attn_weights = attn_weights + causal
            attn_weights = nn.functional.softmax(attn_weights, dim=-1)
            attn_output = torch.matmul(attn_weights, value_states)
        else:
            w = self.W_ukv.weight.view(H, dn + dv, r)
            w_uv = w[:, dn:]
            k_nope = self.W_ukv(c_kv).view(bsz, S, H, dn + dv)[..., :dn].transpose(1, 2)
            attn_weights = torch.matmul(q_nope, k_nope.transpose(2, 3))
            s_pe = torch.bmm(q_pe.reshape(bsz, H * q_len, dr), k_rope.transpose(1, 2)).view(bsz, H, q_len, S)
            attn_weights = (attn_weights + s_pe) * self.softmax_scale + causal
            attn_weights = nn.functional.softmax(attn_weights, dim=-1)
            o_lat = torch.bmm(attn_weights.reshape(bsz, H * q_len, S), c_kv).view(bsz, H, q_len, r)
            attn_output = torch.einsum("bhtr,hvr->bhtv", o_lat, w_uv)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, H * dv)
        return self.W_o(attn_output), (c_kv, k_rope)
