import math

import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    T = h.shape[0]
    query = W_a.dot(s_prev)
    e = np.empty(T, dtype=h.dtype)
    for j in range(T):
        e[j] = np.dot(v_a, np.tanh(query + U_a.dot(h[j])))
    top = e.max()
    alpha = np.exp(e - top)
    alpha /= alpha.sum()
    context = np.zeros(h.shape[1], dtype=h.dtype)
    for j in range(T):
        context += alpha[j] * h[j]
    assert math.isfinite(float(context.sum()))
    return context, alpha
