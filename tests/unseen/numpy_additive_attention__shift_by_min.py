"""BUG: the "stability" shift subtracts the minimum energy instead of the maximum, which makes overflow worse: a spread of 1e4 between energies gives exp(1e4) = inf and NaN weights.
STAGE: the softmax
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.array([v_a @ np.tanh(W_a @ s_prev + U_a @ h_j) for h_j in h], dtype=h.dtype)
    e = e - e.min()
    alpha = np.exp(e) / np.exp(e).sum()
    context = alpha @ h
    return context, alpha
