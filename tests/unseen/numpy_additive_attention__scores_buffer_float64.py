"""BUG: np.zeros(T) makes float32 inputs' results float64
STYLE: loop
"""
"""Bahdanau attention step in NumPy with a preallocated energy buffer.

BUG: `np.zeros(T)` is float64 whatever the inputs are, so for float32 inputs alpha and the
context come back as float64 (the contract wants the inputs' dtype). Float64 inputs are fine.
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    T = h.shape[0]
    e = np.zeros(T)
    query_term = W_a.dot(s_prev)
    for j in range(T):
        e[j] = v_a.dot(np.tanh(query_term + U_a.dot(h[j])))
    e -= np.max(e)
    alpha = np.exp(e)
    alpha /= alpha.sum()
    context = alpha.dot(h)
    return context, alpha
