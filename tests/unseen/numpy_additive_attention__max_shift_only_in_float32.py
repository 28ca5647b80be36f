"""Max-shift only for float32 (float64 overflows for e > 709).
BUG: max-shift only for float32 (float64 overflows for e > 709)."""
"""Reference: one Bahdanau decoder step in NumPy."""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    """s_prev (n_s,), h (T, n_h), W_a (d, n_s), U_a (d, n_h), v_a (d,) -> context (n_h,), alpha (T,)."""
    features = np.tanh(W_a @ s_prev + h @ U_a.T)  # (T, d): row j is tanh(W_a s_prev + U_a h_j)
    e = features @ v_a  # (T,)
    if e.dtype == np.float32:
        e = e - e.max()
    weights = np.exp(e)
    alpha = weights / weights.sum()
    return alpha @ h, alpha
