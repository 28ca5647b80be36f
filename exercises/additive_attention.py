"""Additive (Bahdanau) attention: a stub for you to fill in.

Generated from grader/problems/additive_attention.py; grade it with `pytest -k additive_attention`.
"""

import torch
from torch import nn

from .masked_softmax import masked_softmax


class AdditiveAttention(nn.Module):
    """Additive attention: scores[b, i, j] = w_v . tanh(W_q q_i + W_k k_j)."""

    def __init__(self, query_dim, key_dim, attn_dim, dropout=0.0):
        """Create exactly these parameters (no biases) and a dropout of probability `dropout`:
        W_q = nn.Linear(query_dim, attn_dim, bias=False)  maps queries to h
        W_k = nn.Linear(key_dim, attn_dim, bias=False)    maps keys to h
        w_v = nn.Linear(attn_dim, 1, bias=False)          maps h to one score

        Args:
            query_dim: dq
            key_dim: dk
            attn_dim: h
            dropout: probability, 0.0 by default

        Dims:
            dq: query feature size
            dk: key feature size
            h: attention hidden size
        """
        raise NotImplementedError("AdditiveAttention.__init__: not started")

    def forward(self, queries, keys, values, valid_lens=None):
        """scores[b, i, j] = w_v . tanh(W_q q_i + W_k k_j), shape (B, Tq, Tk);
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
        raise NotImplementedError("AdditiveAttention.forward: not started")
