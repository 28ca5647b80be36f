"""Causal self-attention with RoPE, GQA and a KV cache: a stub for you to fill in.

Generated from grader/problems/causal_self_attention.py; grade it with `pytest -k causal_self_attention`.
"""

import torch
from torch import nn

from .rope import apply_rope


class CausalSelfAttention(nn.Module):
    """The attention of a LLaMA-style decoder: RoPE, grouped-query heads (Hkv key/value heads) and a KV cache."""

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, rope_base=10000.0):
        """E = embed_dim, H = num_heads, Hkv = num_kv_heads (H by default), d = E // H. E % H != 0,
        num_kv_heads < 1, H % Hkv != 0 or an odd d raise ValueError. Exactly these parameters, no biases:
        W_q = nn.Linear(E, E), W_k = nn.Linear(E, Hkv*d), W_v = nn.Linear(E, Hkv*d), W_o = nn.Linear(E, E).
        Head n uses features n*d:(n+1)*d of a projection. Any buffer you register is persistent=False.

        Args:
            embed_dim: E
            num_heads: H
            num_kv_heads: Hkv, H by default
            rope_base: RoPE's base, 10000.0 by default

        Dims:
            H: number of heads
            E: embedding size (= H * d)
            Hkv: number of key/value heads (Hq % Hkv == 0)
        """
        raise NotImplementedError("CausalSelfAttention.__init__: not started")

    def forward(self, x, cache=None):
        """x (B, T, E) holds T new tokens; cache is None (P = 0) or (k, v), each (B, Hkv, P, d): the rotated keys
        and the values of the P earlier tokens. The new tokens sit at positions P..P+T-1; their queries and
        keys are rotated as apply_rope(..., interleaved=False, base=rope_base); new token t attends to every
        earlier token and to new tokens up to itself; query head n uses key/value head n // (H // Hkv); heads
        are concatenated in order, then W_o: output (B, T, E). The returned cache is (cat(k_past, k_new),
        cat(v_past, v_new)), each (B, Hkv, P+T, d); the given cache is never modified. Splitting a sequence
        into a prefill and later calls gives the same outputs and final cache as one call.

        Args:
            x: (B, T, E)
            cache: None, or (k, v), each (B, Hkv, P, d)

        Returns:
            output: (B, T, E)
            k: (B, Hkv, S, d), S = P + T: the keys, rotated
            v: (B, Hkv, S, d): the values

        Dims:
            B: batch size
            E: embedding size (= H * d)
            d: feature size per head, or the attention size
            T: encoder steps, or positions (rows) of x
            Hkv: number of key/value heads (Hq % Hkv == 0)
            P: cached positions
            S: key positions: cached and new (P + T), or the encoder memory's
        """
        raise NotImplementedError("CausalSelfAttention.forward: not started")
