"""Cross-attention with a memory cache: a stub for you to fill in.

Generated from grader/problems/cross_attention.py; grade it with `pytest -k cross_attention`.
"""

import torch
from torch import nn


class CrossAttention(nn.Module):
    """Encoder-decoder multi-head attention: queries from x, keys and values from the memory, cached."""

    def __init__(self, embed_dim, num_heads, memory_dim=None, dropout=0.0):
        """E = embed_dim, E_mem = memory_dim (E by default), H = num_heads, d = E // H; E % H != 0 raises
        ValueError. Exactly these parameters, each with a bias, and a dropout of probability `dropout`:
        W_q = nn.Linear(E, E), W_k = nn.Linear(E_mem, E), W_v = nn.Linear(E_mem, E), W_o = nn.Linear(E, E).
        Head n uses features n*d:(n+1)*d of a projection.

        Args:
            embed_dim: E
            num_heads: H
            memory_dim: E_mem, E by default
            dropout: probability, 0.0 by default

        Dims:
            H: number of heads
            E: embedding size (= H * d)
            E_mem: memory feature size (memory_dim)
        """
        raise NotImplementedError("CrossAttention.__init__: not started")

    def forward(self, x, memory=None, memory_mask=None, cache=None):
        """Without a cache: k = W_k(memory), v = W_v(memory), split into heads, (B, H, S, d) each; the returned
        cache is (k, v). memory=None and cache=None raises ValueError. With a cache (k, v), memory is
        ignored (it may be None) and never projected; the returned cache is the given one.
        Per head: weights = softmax(q k^T / sqrt(d)) over the allowed memory positions (memory_mask (B, S),
        True = attend, the same for every head and query), 0 elsewhere; a row with no allowed position has
        weights 0 and context 0. context = dropout(weights) @ v; heads concatenated in order, then W_o.
        The weights are returned per head, before dropout. In eval() it equals nn.MultiheadAttention(E, H,
        kdim=E_mem, vdim=E_mem, batch_first=True) with key_padding_mask=~memory_mask; do not call it (nor
        F.scaled_dot_product_attention): the grader intercepts them.

        Args:
            x: (B, Tq, E): the decoder's states (the queries)
            memory: (B, S, E_mem): the encoder's states, or None with a cache
            memory_mask: None, or bool (B, S); True = the position may be attended
            cache: None, or (k, v), each (B, H, S, d)

        Returns:
            output: (B, Tq, E)
            weights: (B, H, Tq, S)
            k: (B, H, S, d): W_k(memory) split into heads
            v: (B, H, S, d): W_v(memory) split into heads

        Dims:
            B: batch size
            H: number of heads
            Tq: number of queries
            E: embedding size (= H * d)
            d: feature size per head, or the attention size
            S: key positions: cached and new (P + T), or the encoder memory's
            E_mem: memory feature size (memory_dim)
        """
        raise NotImplementedError("CrossAttention.forward: not started")
