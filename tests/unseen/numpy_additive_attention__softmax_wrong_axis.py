"""STYLE: vectorised NumPy with a batch-style softmax helper (axis=-1) reused on a column of scores
BUG: the scores are kept as a (T, 1) column and the softmax runs over the last axis (size 1), so every alpha is 1 and the context is the sum of h.
STAGE: weights
WHEN: always (T > 1)
"""
import numpy as np


def softmax(x, axis=-1):
    x = x - np.max(x, axis=axis, keepdims=True)
    ex = np.exp(x)
    return ex / np.sum(ex, axis=axis, keepdims=True)


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    # (T, d): W_a s_prev broadcast against U_a h_j for every encoder step j
    hidden = np.tanh(s_prev[None, :] @ W_a.T + h @ U_a.T)
    e = hidden @ v_a[:, None]  # (T, 1)
    alpha = softmax(e).reshape(-1)  # (T,)
    context = alpha @ h  # (n_h,)
    return context, alpha
