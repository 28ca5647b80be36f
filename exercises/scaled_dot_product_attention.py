"""Scaled dot-product attention: a stub for you to fill in.

Generated from grader/problems/scaled_dot_product_attention.py; grade it with `pytest -k scaled_dot_product_attention`.
"""

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    """weights = softmax(q k^T / sqrt(d)) over the allowed keys, exactly 0 elsewhere, and all zeros on a
    row with no allowed key; output = weights @ values. Any number of equal leading dims (2-D, 3-D,
    4-D inputs). No dropout. Do not call F.scaled_dot_product_attention, F.multi_head_attention_forward
    or nn.MultiheadAttention: the grader intercepts them.

    Args:
        queries: (..., Tq, d)
        keys: (..., Tk, d)
        values: (..., Tk, dv)
        mask: None, or bool broadcastable to the weights; True = the key may be attended

    Returns:
        output: (..., Tq, dv)
        weights: (..., Tq, Tk)

    Dims:
        Tq: number of queries
        Tk: number of keys (= values)
        dv: value feature size
        d: feature size per head, or the attention size
        ...: zero or more leading (batch) dims
    """
    raise NotImplementedError("scaled_dot_product_attention: not started")
