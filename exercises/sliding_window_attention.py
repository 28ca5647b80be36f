"""Sliding-window attention with sinks: a stub for you to fill in.

Generated from grader/problems/sliding_window_attention.py; grade it with `pytest -k sliding_window_attention`.
"""

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    """Query i sits at pos(i) = i + Tk - Tq (aligned to the bottom right). Key j is allowed for it when
    j <= pos(i) and (j > pos(i) - window or j < num_sinks): the query itself, the window - 1 keys before
    it, and the sinks before it (a sink inside the window counts once). output = softmax(q k^T /
    sqrt(d)) v over the allowed keys, 0 on a row with no allowed key (only when Tq > Tk). Queries are
    taken block_size rows at a time, each block against the keys its rows can see: during the call no
    tensor an operation allocates has more than max(S, L*Tq*(window + num_sinks + block_size))
    elements (S the largest input or output, L the product of the leading dims). window < 1,
    num_sinks < 0 or block_size < 1 raises ValueError. Results do not depend on block_size beyond
    rounding. Do not call F.scaled_dot_product_attention.

    Args:
        queries: (..., Tq, d)
        keys: (..., Tk, d)
        values: (..., Tk, dv)
        window: int >= 1: the query and the window - 1 keys before it
        num_sinks: int >= 0: the first num_sinks keys, seen by every later query
        block_size: queries per block (>= 1)

    Returns:
        output: (..., Tq, dv)

    Dims:
        Tq: number of queries
        Tk: number of keys (= values)
        dv: value feature size
        d: feature size per head, or the attention size
        ...: zero or more leading (batch) dims
    """
    raise NotImplementedError("sliding_window_attention: not started")
