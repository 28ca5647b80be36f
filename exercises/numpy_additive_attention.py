"""Additive attention in NumPy: a stub for you to fill in.

Generated from grader/problems/numpy_additive_attention.py; grade it with `pytest -k numpy_additive_attention`.
"""

import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    """One decoder step of Bahdanau attention, in NumPy only (the module must not import torch):
    e_j = v_a . tanh(W_a s_prev + U_a h_j) for each encoder step j;
    alpha = softmax(e), finite for |e_j| up to 1e4; context = alpha @ h.
    Both come back as NumPy arrays of the inputs' dtype (float32 or float64); inputs are not modified.

    Args:
        s_prev: (n_s,)
        h: (T, n_h)
        W_a: (d, n_s)
        U_a: (d, n_h)
        v_a: (d,)

    Returns:
        context: (n_h,)
        alpha: (T,)

    Dims:
        d: feature size per head, or the attention size
        T: encoder steps, or positions (rows) of x
        n_s: decoder state size
        n_h: encoder state size
    """
    raise NotImplementedError("numpy_additive_attention: not started")
