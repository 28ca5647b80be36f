"""BUG: softmax is computed in float32 and cast back (HF habit), losing precision for float64 inputs.
STAGE: softmax dtype
"""
import torch
from torch import nn
from .rope import apply_rope


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if min(num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v) < 1:
            raise ValueError("all head counts / dimensions must be positive")
        if head_dim_rope % 2 != 0:
            raise ValueError("head_dim_rope must be even for rotary embeddings")
        self.hidden_size = embed_dim
        self.num_heads = num_heads
        self.kv_lora_rank = kv_rank
        self.qk_nope_head_dim = head_dim_nope
        self.qk_rope_head_dim = head_dim_rope
        self.v_head_dim = head_dim_v
        self.q_head_dim = head_dim_nope + head_dim_rope
        self.rope_theta = rope_base
        self.softmax_scale = self.q_head_dim ** (-0.5)

        self.W_q = nn.Linear(embed_dim, num_heads * self.q_head_dim, bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    @staticmethod
    def _causal_mask(q_len, past_len, dtype, device):
        mask = torch.full((q_len, past_len + q_len), float("-inf"), dtype=dtype, device=device)
        return torch.triu(mask, diagonal=past_len + 1)[None, None, :, :]

    def forward(self, hidden_states, cache=None, absorb=False):
        bsz, q_len, _ = hidden_states.size()
        past_len = 0 if cache is None else cache[0].shape[1]
        position_ids = torch.arange(past_len, past_len + q_len, device=hidden_states.device)

        q = self.W_q(hidden_states).view(bsz, q_len, self.num_heads, self.q_head_dim).transpose(1, 2)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

        compressed_kv = self.W_dkv(hidden_states)
        compressed_kv, k_pe = torch.split(compressed_kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)

        q_pe = apply_rope(q_pe, position_ids, base=self.rope_theta, interleaved=False)
        k_pe = apply_rope(k_pe, position_ids, base=self.rope_theta, interleaved=False)

        if cache is not None:
            compressed_kv = torch.cat([cache[0], compressed_kv], dim=1)
            k_pe = torch.cat([cache[1], k_pe], dim=1)

        attn_mask = self._causal_mask(q_len, past_len, q.dtype, q.device)
        if absorb:
            attn_output = self._absorbed(q_nope, q_pe, compressed_kv, k_pe, attn_mask)
        else:
            attn_output = self._naive(q_nope, q_pe, compressed_kv, k_pe, attn_mask)

        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, self.num_heads * self.v_head_dim)
        attn_output = self.W_o(attn_output)
        return attn_output, (compressed_kv, k_pe)

    def _naive(self, q_nope, q_pe, compressed_kv, k_pe, attn_mask):
        bsz, _, q_len, _ = q_nope.shape
        kv_seq_len = compressed_kv.shape[1]
        kv = (self.W_ukv(compressed_kv)
              .view(bsz, kv_seq_len, self.num_heads, self.qk_nope_head_dim + self.v_head_dim)
              .transpose(1, 2))
        k_nope, value_states = torch.split(kv, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)

        query_states = q_pe.new_empty(bsz, self.num_heads, q_len, self.q_head_dim)
        query_states[:, :, :, :self.qk_nope_head_dim] = q_nope
        query_states[:, :, :, self.qk_nope_head_dim:] = q_pe

        key_states = k_pe.new_empty(bsz, self.num_heads, kv_seq_len, self.q_head_dim)
        key_states[:, :, :, :self.qk_nope_head_dim] = k_nope
        key_states[:, :, :, self.qk_nope_head_dim:] = k_pe[:, None]

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.softmax_scale
        attn_weights = attn_weights + attn_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        return torch.matmul(attn_weights, value_states)

    def _absorbed(self, q_nope, q_pe, compressed_kv, k_pe, attn_mask):
        bsz, H, q_len, _ = q_nope.shape
        kv_seq_len = compressed_kv.shape[1]
        r = self.kv_lora_rank
        w = self.W_ukv.weight.view(H, self.qk_nope_head_dim + self.v_head_dim, r)
        w_uk, w_uv = w[:, :self.qk_nope_head_dim], w[:, self.qk_nope_head_dim:]

        # per-head absorption: (H, B*T, dn) @ (H, dn, r) -> (H, B*T, r)
        q_lat = torch.bmm(q_nope.transpose(0, 1).reshape(H, bsz * q_len, self.qk_nope_head_dim), w_uk)
        q_lat = q_lat.view(H, bsz, q_len, r).transpose(0, 1).reshape(bsz, H * q_len, r)
        q_rot = q_pe.reshape(bsz, H * q_len, self.qk_rope_head_dim)

        # heads folded into the query axis: the latent is shared, never copied per head
        attn_weights = (torch.bmm(q_lat, compressed_kv.transpose(1, 2)) +
                        torch.bmm(q_rot, k_pe.transpose(1, 2)))
        attn_weights = attn_weights.view(bsz, H, q_len, kv_seq_len) * self.softmax_scale + attn_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q_lat.dtype)

        ctx = torch.bmm(attn_weights.reshape(bsz, H * q_len, kv_seq_len), compressed_kv)  # (B, H*T, r)
        ctx = ctx.view(bsz, H, q_len, r).transpose(0, 1).reshape(H, bsz * q_len, r)
        out = torch.bmm(ctx, w_uv.transpose(1, 2))  # (H, B*T, dv)
        return out.view(H, bsz, q_len, self.v_head_dim).transpose(0, 1)
