"""BUG: misplaced parenthesis: tanh is applied to W_a s_prev only, U_a h_j is added outside the tanh (e_j = v_a . (tanh(W_a s_prev) + U_a h_j)). Differs on: any generic input.
STAGE: e (energies)
STYLE: compact broadcasting one-liner
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = (np.tanh(W_a @ s_prev) + h @ U_a.T) @ v_a
    e = e - np.max(e)
    alpha = np.exp(e) / np.exp(e).sum()
    return alpha @ h, alpha
