"""Causal linear attention: a stub for you to fill in.

Generated from grader/problems/linear_attention.py; grade it with `pytest -k linear_attention`.
"""

import torch


def linear_attention_step(q_t, k_t, v_t, state=None):
    """One token of the recurrent form. state None means zeros; else (S, z), the sums over earlier tokens.
    Adds the new token first (S + phi(k_t) v_t^T, z + phi(k_t)), then out_t = phi(q_t)^T S /
    (phi(q_t)^T z) from the new sums; returns (out_t, (S, z)), the given state never modified.

    Args:
        q_t: (B, H, d)
        k_t: (B, H, d)
        v_t: (B, H, dv)
        state: None, or the pair of sums over earlier tokens: of phi(k) v^T (B, H, d, dv), of phi(k) (B, H, d)

    Returns:
        out_t: (B, H, dv)
        S: (B, H, d, dv)
        z: (B, H, d)

    Dims:
        B: batch size
        H: number of heads
        dv: value feature size
        d: feature size per head, or the attention size
    """
    raise NotImplementedError("linear_attention.linear_attention_step: not started")


def causal_linear_attention(queries, keys, values, chunk_size=None):
    """phi(x) = elu(x) + 1 (alpha = 1). out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i), S_i = sum over j <= i of
    phi(k_j) v_j^T, z_i = sum over j <= i of phi(k_j); no epsilon in the denominator. chunk_size None:
    any form. chunk_size an int >= 1 (else ValueError): chunks of chunk_size positions, the last maybe
    partial, a running (S, z) carried across them; no tensor an operation allocates has more than
    max(S, L*C*max(C, d, dv), L*d*dv) elements (C = chunk_size, L = B*H, S the largest input or
    output). Stepping linear_attention_step over t = 0..T-1 from None gives the same outputs.

    Args:
        queries: (B, H, T, d): features in [-8, 1e4]
        keys: (B, H, T, d): features in [-8, 1e4]
        values: (B, H, T, dv)
        chunk_size: None, or positions per chunk (>= 1)

    Returns:
        output: (B, H, T, dv)

    Dims:
        B: batch size
        H: number of heads
        dv: value feature size
        d: feature size per head, or the attention size
        T: encoder steps, or positions (rows) of x
    """
    raise NotImplementedError("linear_attention: not started")
