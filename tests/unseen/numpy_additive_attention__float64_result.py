"""BUG: energies are copied into a float64 array "for precision" and never cast back, so float32 inputs come back as float64 arrays.
STAGE: the softmax
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.asarray(np.tanh(h @ U_a.T + W_a @ s_prev) @ v_a, dtype=np.float64)
    e -= e.max()
    alpha = np.exp(e)
    alpha /= alpha.sum()
    context = alpha @ h
    return context, alpha
