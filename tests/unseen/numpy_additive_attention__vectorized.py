"""BUG: none
STYLE: vectorised NumPy: project all encoder states at once (h @ U_a.T), broadcast-add W_a s_prev, tanh, dot with v_a, max-shifted softmax, alpha @ h.
"""
import numpy as np


def softmax(x):
    z = x - np.max(x)
    e = np.exp(z)
    return e / np.sum(e)


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    query = W_a @ s_prev                    # (d,)
    keys = h @ U_a.T                        # (T, d)
    e = np.tanh(keys + query) @ v_a         # (T,)
    alpha = softmax(e)
    context = alpha @ h                     # (n_h,)
    return context, alpha
