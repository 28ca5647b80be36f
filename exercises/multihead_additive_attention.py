"""Multi-head additive attention: a stub for you to fill in.

Generated from grader/problems/multihead_additive_attention.py; grade it with `pytest -k multihead_additive_attention`.
"""

import torch
from torch import nn

from .masked_softmax import masked_softmax


class MultiHeadAdditiveAttention(nn.Module):
    """Multi-head additive attention: H additive scorers over the same values."""

    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        """Create exactly these parameters (no biases) and a dropout of probability `dropout`:
        W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        w_v = nn.Parameter of shape (num_heads, attn_dim)
        W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        Head n uses rows n*attn_dim:(n+1)*attn_dim of W_q and W_k, and w_v[n].

        Args:
            num_heads: H
            query_dim: dq
            key_dim: dk
            value_dim: dv
            attn_dim: h, per head
            dropout: probability, 0.0 by default

        Dims:
            H: number of heads
            dq: query feature size
            dk: key feature size
            dv: value feature size
            h: attention hidden size
        """
        raise NotImplementedError("MultiHeadAdditiveAttention.__init__: not started")

    def forward(self, queries, keys, values, valid_lens=None):
        """scores[b, n, i, j] = w_v[n] . tanh((W_q q_i)[n] + (W_k k_j)[n]);
        weights = masked softmax over j per head, valid_lens applied to every head, (B, H, Tq, Tk);
        context[b, i] = concat over n of (dropout(weights[b, n]) @ values[b])[i], (B, Tq, H*dv);
        output = W_o(context). The returned weights are per head (not averaged), before dropout.

        Args:
            queries: (B, Tq, dq)
            keys: (B, Tk, dk)
            values: (B, Tk, dv)
            valid_lens: None, (B,) or (B, Tq) integer tensor; key j is valid for a query when j < valid_len

        Returns:
            output: (B, Tq, dv)
            weights: (B, H, Tq, Tk)

        Dims:
            B: batch size
            H: number of heads
            Tq: number of queries
            Tk: number of keys (= values)
            dq: query feature size
            dk: key feature size
            dv: value feature size
        """
        raise NotImplementedError("MultiHeadAdditiveAttention.forward: not started")
