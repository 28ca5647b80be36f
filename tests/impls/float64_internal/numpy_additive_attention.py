"""NumPy in float64 inside, the inputs' dtype outside."""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    dt = s_prev.dtype
    e = np.tanh(W_a.astype(np.float64) @ s_prev.astype(np.float64) + h.astype(np.float64) @ U_a.astype(np.float64).T)
    e = e @ v_a.astype(np.float64)
    alpha = np.exp(e - e.max())
    alpha /= alpha.sum()
    return (alpha @ h.astype(np.float64)).astype(dt), alpha.astype(dt)
