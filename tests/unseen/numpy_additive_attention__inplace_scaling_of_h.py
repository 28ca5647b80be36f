"""BUG: the context is formed by scaling the encoder states in place (h *= alpha[:, None]) and summing, which overwrites the caller's h.
STAGE: the weighted sum
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.tanh(h @ U_a.T + W_a @ s_prev) @ v_a
    e = e - e.max()
    alpha = np.exp(e) / np.sum(np.exp(e))
    h *= alpha[:, None]
    context = h.sum(axis=0)
    return context, alpha
