"""Multi-head latent attention (MLA): a stub for you to fill in.

Generated from grader/problems/latent_attention.py; grade it with `pytest -k latent_attention`.
"""

import torch
from torch import nn

from .rope import apply_rope


class LatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2) without query compression: a latent cache and one shared rotated key per token."""

    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        """E = embed_dim, H = num_heads, r = kv_rank, dn = head_dim_nope, dr = head_dim_rope, dv = head_dim_v.
        H, r, dn, dr or dv below 1, or an odd dr, raise ValueError. Exactly these parameters, no biases:
        W_q = nn.Linear(E, H*(dn+dr)), W_dkv = nn.Linear(E, r+dr), W_ukv = nn.Linear(r, H*(dn+dv)),
        W_o = nn.Linear(H*dv, E). Head n: W_q's features n*(dn+dr):(n+1)*(dn+dr), first dn = q_nope, last
        dr = q_rope; W_dkv: first r = c_kv, last dr = k_rope (shared by all heads); W_ukv's features
        n*(dn+dv):(n+1)*(dn+dv), first dn = k_nope, last dv = v. Any buffer you register is persistent=False.

        Args:
            embed_dim: E
            num_heads: H
            kv_rank: r, the latent's size
            head_dim_nope: dn
            head_dim_rope: dr (even)
            head_dim_v: dv
            rope_base: RoPE's base, 10000.0 by default

        Dims:
            H: number of heads
            dv: value feature size
            E: embedding size (= H * d)
            r: latent size (kv_rank)
            dn: per-head key features without RoPE (head_dim_nope)
            dr: RoPE'd key features shared by all heads (head_dim_rope)
        """
        raise NotImplementedError("LatentAttention.__init__: not started")

    def forward(self, x, cache=None, absorb=False):
        """x (B, T, E) holds T new tokens at positions P..P+T-1; cache is None (P = 0) or (c_kv (B, P, r),
        k_rope (B, P, dr)) of the earlier tokens, k_rope already rotated. q_rope and the new k_rope are rotated
        by apply_rope(..., interleaved=False, base=rope_base) at their positions. Head n: query [q_nope ;
        q_rope], key of token s [k_nope_n(s) ; k_rope(s)], scores scaled by 1/sqrt(dn + dr); new token t
        attends to every cached token and to new tokens up to itself; output_n = softmax @ v_n; output =
        W_o(heads concatenated). The returned cache is (cat(c_past, c_new), cat(k_rope_past, k_rope_new));
        the given cache is never modified. absorb=True gives the same result by folding W_ukv's key part
        into the query and its value part after the weighted sum of latents: then no tensor an operation
        allocates has more than max(S, B*H*T*(P+T), B*T*H*max(r, dn+dr, dv)) elements (S the largest
        input, output or parameter). Splitting a sequence into calls gives the same outputs and cache.

        Args:
            x: (B, T, E)
            cache: None, or (c_kv (B, P, r), k_rope (B, P, dr)), k_rope rotated
            absorb: bool: fold W_ukv into the query and the output (decoding)

        Returns:
            output: (B, T, E)
            c_kv: (B, S, r), S = P + T: the latents
            k_rope: (B, S, dr): the shared keys, rotated

        Dims:
            B: batch size
            E: embedding size (= H * d)
            T: encoder steps, or positions (rows) of x
            P: cached positions
            S: key positions: cached and new (P + T), or the encoder memory's
            r: latent size (kv_rank)
            dr: RoPE'd key features shared by all heads (head_dim_rope)
        """
        raise NotImplementedError("LatentAttention.forward: not started")
