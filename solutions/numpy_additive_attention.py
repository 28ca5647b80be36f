"""Reference: one Bahdanau decoder step in NumPy."""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    """s_prev (n_s,), h (T, n_h), W_a (d, n_s), U_a (d, n_h), v_a (d,) -> context (n_h,), alpha (T,)."""
    features = np.tanh(W_a @ s_prev + h @ U_a.T)  # (T, d): row j is tanh(W_a s_prev + U_a h_j)
    e = features @ v_a  # (T,)
    e = e - e.max()  # exp of the largest score is 1: no overflow
    weights = np.exp(e)
    alpha = weights / weights.sum()
    return alpha @ h, alpha
