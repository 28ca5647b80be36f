"""Attention backward: a stub for you to fill in.

Generated from grader/problems/attention_backward.py; grade it with `pytest -k attention_backward`.
"""

import torch


def attention_backward(queries, keys, values, grad_output, is_causal=False):
    """With O = softmax(q k^T / sqrt(d)) v over the allowed keys (the causal rule of flash_attention), return the
    gradients of sum(O * grad_output) with respect to queries, keys and values, each of its input's
    shape, dtype and device. Rows with no allowed key contribute nothing. No automatic differentiation
    of any kind (Tensor.backward, torch.autograd.grad/backward, torch.autograd.functional, forward_ad,
    torch.func): the grader switches it off during the call. Never modifies its inputs; stable for
    scores up to 1e4 in float32.

    Args:
        queries: (..., Tq, d)
        keys: (..., Tk, d)
        values: (..., Tk, dv)
        grad_output: (..., Tq, dv)
        is_causal: bool: key j allowed for query i when j <= i + (Tk - Tq)

    Returns:
        grad_queries: (..., Tq, d)
        grad_keys: (..., Tk, d)
        grad_values: (..., Tk, dv)

    Dims:
        Tq: number of queries
        Tk: number of keys (= values)
        dv: value feature size
        d: feature size per head, or the attention size
        ...: zero or more leading (batch) dims
    """
    raise NotImplementedError("attention_backward: not started")
