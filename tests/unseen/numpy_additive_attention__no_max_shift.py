"""BUG: the softmax exponentiates the raw energies without subtracting their max, so energies around 1e4 overflow to inf and alpha becomes NaN.
STAGE: the softmax
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    query = W_a @ s_prev
    keys = h @ U_a.T
    e = np.tanh(keys + query) @ v_a
    exp_e = np.exp(e)
    alpha = exp_e / np.sum(exp_e)
    context = alpha @ h
    return context, alpha
