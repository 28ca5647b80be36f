"""BUG: none
STYLE: course-notebook style with column vectors: s_prev as (n_s, 1), encoder states as columns (n_h, T), energies as a (1, T) row, softmax along axis=1 with keepdims, flattened on return.
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    s = s_prev.reshape(-1, 1)                          # (n_s, 1)
    H = h.T                                            # (n_h, T)
    energies = v_a.reshape(1, -1) @ np.tanh(W_a @ s + U_a @ H)   # (1, T)
    energies = energies - np.max(energies, axis=1, keepdims=True)
    weights = np.exp(energies)
    weights = weights / np.sum(weights, axis=1, keepdims=True)    # (1, T)
    context = H @ weights.T                            # (n_h, 1)
    return context.ravel(), weights.ravel()
