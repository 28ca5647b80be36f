"""BUG: the tanh is applied after the dot with v_a (e_j = tanh(v_a . (W_a s + U_a h_j))) instead of inside it.
STAGE: the scores
"""
import numpy as np


def softmax(x):
    x = x - x.max()
    return np.exp(x) / np.exp(x).sum()


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.tanh((h @ U_a.T + W_a @ s_prev) @ v_a)
    alpha = softmax(e)
    return alpha @ h, alpha
