"""Local attention: a stub for you to fill in.

Generated from grader/problems/local_attention.py; grade it with `pytest -k local_attention`.
"""

import torch
from torch import nn


class LocalAttention(nn.Module):
    """Luong's local attention with the general score."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        """Parameters, no biases: W_a = nn.Linear(key_dim, query_dim) (both modes); local-p only: W_p = nn.Linear(query_dim, align_dim), v_p = nn.Linear(align_dim, 1).
        window not an int >= 1, an unknown mode (naming local-m and local-p), or local-p with align_dim=None raise ValueError; local-m ignores align_dim.

        Args:
            query_dim: dq
            key_dim: dk
            window: D, an int >= 1
            mode: local-m or local-p
            align_dim: size of W_p's output (local-p only)

        Dims:
            dq: query feature size
            dk: key feature size
        """
        raise NotImplementedError("LocalAttention.__init__: not started")

    def forward(self, queries, keys, values, valid_lens=None):
        """D = window (an int >= 1). Aligned position p_t (a real number; t is the query's index):
          local-m: p_t = t (not clipped)
          local-p: p_t = (L - 1) * sigmoid(v_p . tanh(W_p h_t)), L = the row's valid length (Tk when valid_lens is None)
        Key s is allowed when s < L and |s - p_t| <= D.
        scores[b, t, s] = h_t . (W_a k_s); a = softmax of the scores over the allowed keys, 0 elsewhere.
        local-m: weights = a. local-p: weights = a * exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2 (not renormalised).
        output = weights @ values. A row with no allowed key has weights 0 and output 0.

        Args:
            queries: (B, Tq, dq): the decoder states h_t
            keys: (B, Tk, dk)
            values: (B, Tk, dv)
            valid_lens: None, (B,) or (B, Tq) integer tensor; key j is valid for a query when j < valid_len

        Returns:
            output: (B, Tq, dv)
            weights: (B, Tq, Tk)

        Dims:
            B: batch size
            Tq: number of queries
            Tk: number of keys (= values)
            dq: query feature size
            dk: key feature size
            dv: value feature size
        """
        raise NotImplementedError("LocalAttention.forward: not started")
