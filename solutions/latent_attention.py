"""Reference: multi-head latent attention (DeepSeek-V2) with a cache of one latent and one rotated key per token."""
import torch
from torch import nn

from .rope import apply_rope


class LatentAttention(nn.Module):
    """Attention whose cache holds, per token, a latent c_kv (r numbers) and one rotated key k_rope (dr numbers)."""

    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if min(num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v) < 1 or head_dim_rope % 2:
            raise ValueError(f"num_heads = {num_heads}, kv_rank = {kv_rank}, head_dim_nope = {head_dim_nope}, "
                             f"head_dim_rope = {head_dim_rope} (even) and head_dim_v = {head_dim_v} must be at least 1")
        self.H, self.r, self.dn, self.dr, self.dv = num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        """x (B, T, E), cache None or (c_kv (B, P, r), k_rope (B, P, dr)) -> output (B, T, E), c_kv (B, P+T, r),
        k_rope (B, P+T, dr)."""
        B, T, _ = x.shape
        H, r, dn, dr, dv = self.H, self.r, self.dn, self.dr, self.dv
        P = 0 if cache is None else cache[0].shape[1]
        positions = torch.arange(P, P + T, device=x.device)
        q = self.W_q(x).view(B, T, H, dn + dr).transpose(1, 2)  # (B, H, T, dn+dr)
        q_nope, q_rope = q[..., :dn], apply_rope(q[..., dn:], positions, base=self.rope_base)
        latent = self.W_dkv(x)  # (B, T, r+dr)
        c_new, k_raw = latent[..., :r], latent[..., r:]
        k_new = apply_rope(k_raw, positions, base=self.rope_base)  # rotated once, at its own position
        c_kv = c_new if cache is None else torch.cat((cache[0], c_new), dim=1)  # (B, S, r), S = P + T
        k_rope = k_new if cache is None else torch.cat((cache[1], k_new), dim=1)  # (B, S, dr)
        S = P + T
        w = self.W_ukv.weight.view(H, dn + dv, r)  # head n: rows n*(dn+dv) .. (n+1)*(dn+dv) of W_ukv
        w_k, w_v = w[:, :dn], w[:, dn:]  # (H, dn, r), (H, dv, r)
        # the shared rotated key: the heads folded into the query axis, so that k_rope is never copied per head
        rope_scores = (q_rope.reshape(B, H * T, dr) @ k_rope.transpose(1, 2)).view(B, H, T, S)
        if absorb:  # q_nope . (W_uk c) = (W_uk^T q_nope) . c: no per-head key is ever built
            q_latent = torch.einsum("bhtn,hnr->bhtr", q_nope, w_k)  # (B, H, T, r)
            nope_scores = (q_latent.reshape(B, H * T, r) @ c_kv.transpose(1, 2)).view(B, H, T, S)
        else:
            k_nope = torch.einsum("hnr,bsr->bhsn", w_k, c_kv)  # (B, H, S, dn): per-head keys, allowed here
            nope_scores = q_nope @ k_nope.transpose(-2, -1)
        scores = (nope_scores + rope_scores) / (dn + dr) ** 0.5  # (B, H, T, S)
        allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(P)  # new token t sees 0 .. P + t
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        if absorb:  # the weighted sum of latents first, then each head's value map
            mixed = (weights.reshape(B, H * T, S) @ c_kv).view(B, H, T, r)
            heads = torch.einsum("bhtr,hvr->bhtv", mixed, w_v)  # (B, H, T, dv)
        else:
            heads = weights @ torch.einsum("hvr,bsr->bhsv", w_v, c_kv)  # (B, H, S, dv) per-head values
        return self.W_o(heads.transpose(1, 2).reshape(B, T, H * dv)), (c_kv, k_rope)
