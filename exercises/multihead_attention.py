"""Transformer multi-head attention: a stub for you to fill in.

Generated from grader/problems/multihead_attention.py; grade it with `pytest -k multihead_attention`.
"""

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    """Transformer multi-head attention (batch first): H scaled dot-product heads, then W_o."""

    def __init__(self, embed_dim, num_heads, dropout=0.0):
        """embed_dim % num_heads != 0 raises ValueError. Create exactly these parameters, each with a bias,
        and a dropout of probability `dropout`:
        W_q, W_k, W_v, W_o = nn.Linear(embed_dim, embed_dim)
        Head n uses features n*d:(n+1)*d of the projected q, k, v, d = embed_dim // num_heads.

        Args:
            embed_dim: E
            num_heads: H
            dropout: probability, 0.0 by default

        Dims:
            H: number of heads
            E: embedding size (= H * d)
        """
        raise NotImplementedError("MultiHeadAttention.__init__: not started")

    def forward(self, queries, keys, values, mask=None):
        """Per head: weights = softmax(q k^T / sqrt(d)) over allowed keys, exactly 0 elsewhere (all zeros, and
        that head's context 0, on a row with no allowed key); context = dropout(weights) @ v; heads
        concatenated in order, then W_o. The weights are returned per head, before dropout. A per-batch
        mask (B, Tq, Tk) is passed as mask[:, None]. In eval() it equals nn.MultiheadAttention(E, H,
        batch_first=True) with the same weights and the inverted mask; do not call it (nor
        F.scaled_dot_product_attention): the grader intercepts them.

        Args:
            queries: (B, Tq, E)
            keys: (B, Tk, E)
            values: (B, Tk, E)
            mask: None, or bool broadcastable to the weights; True = the key may be attended

        Returns:
            output: (B, Tq, E)
            weights: (B, H, Tq, Tk)

        Dims:
            B: batch size
            H: number of heads
            Tq: number of queries
            Tk: number of keys (= values)
            E: embedding size (= H * d)
        """
        raise NotImplementedError("MultiHeadAttention.forward: not started")
