"""BUG: the context is the weighted sum of the projected keys U_a h_j (size d) instead of the encoder states h_j themselves.
STAGE: the weighted sum
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    keys = h @ U_a.T                          # (T, d)
    e = np.tanh(keys + W_a @ s_prev) @ v_a
    alpha = np.exp(e - e.max())
    alpha = alpha / alpha.sum()
    context = alpha @ keys
    return context, alpha
