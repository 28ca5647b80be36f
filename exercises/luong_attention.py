"""Luong attention: a stub for you to fill in.

Generated from grader/problems/luong_attention.py; grade it with `pytest -k luong_attention`.
"""

import torch
from torch import nn

from .masked_softmax import masked_softmax


class LuongAttention(nn.Module):
    """Luong attention with a choice of scoring function."""

    def __init__(self, query_dim, key_dim, score="general", attn_dim=None, dropout=0.0):
        """Pick the scoring function by `score` and create only that mode's parameters:

        score      scores[b, i, j]                  parameters (no biases)
        dot        q_i . k_j                        none; query_dim != key_dim raises ValueError
        scaled_dot q_i . k_j / sqrt(key_dim)        none; same dimension rule
        general    q_i . (W_a k_j)                  W_a = nn.Linear(key_dim, query_dim, bias=False)
        concat     v_a . tanh(W_a [q_i ; k_j])      W_a = nn.Linear(query_dim + key_dim, attn_dim, bias=False),
                                                    v_a = nn.Linear(attn_dim, 1, bias=False);
                                                    attn_dim=None raises ValueError
        Any other score raises ValueError naming the valid choices.

        Args:
            query_dim: dq
            key_dim: dk
            score: one of dot, scaled_dot, general, concat
            attn_dim: h (concat only)
            dropout: probability, 0.0 by default

        Dims:
            dq: query feature size
            dk: key feature size
            h: attention hidden size
        """
        raise NotImplementedError("LuongAttention.__init__: not started")

    def forward(self, queries, keys, values, valid_lens=None):
        """scores (B, Tq, Tk) as chosen by `score`;
        weights = masked_softmax(scores, valid_lens), taken before dropout;
        output = dropout(weights) @ values. In eval() mode dropout does nothing.

        Args:
            queries: (B, Tq, dq)
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
        raise NotImplementedError("LuongAttention.forward: not started")
