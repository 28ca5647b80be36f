"""Grouped-query attention: a stub for you to fill in.

Generated from grader/problems/grouped_query_attention.py; grade it with `pytest -k grouped_query_attention`.
"""

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    """Query head n attends with key/value head n // G, G = Hq // Hkv (Hq % Hkv != 0 raises ValueError).
    weights = softmax(q k^T / sqrt(d)) over the allowed keys, exactly 0 elsewhere, all zeros on a row
    with no allowed key; output = weights @ values. Keys and values are not repeated per query head:
    no tensor an operation allocates during the call has more than max(S, B*Hq*Tq*Tk, B*Hq*Tq*dv)
    elements, S the largest input. Do not call F.scaled_dot_product_attention.

    Args:
        queries: (B, Hq, Tq, d)
        keys: (B, Hkv, Tk, d)
        values: (B, Hkv, Tk, dv)
        mask: None, or bool broadcastable to the weights; True = the key may be attended, up to (B, Hq, Tq, Tk)

    Returns:
        output: (B, Hq, Tq, dv)
        weights: (B, Hq, Tq, Tk)

    Dims:
        B: batch size
        Tq: number of queries
        Tk: number of keys (= values)
        dv: value feature size
        d: feature size per head, or the attention size
        Hq: number of query heads
        Hkv: number of key/value heads (Hq % Hkv == 0)
    """
    raise NotImplementedError("grouped_query_attention: not started")
