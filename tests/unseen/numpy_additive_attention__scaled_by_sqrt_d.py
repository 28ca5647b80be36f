"""BUG: the energies are divided by sqrt(d) (a Transformer habit) before the softmax.
STAGE: the scores
"""
import math

import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    d = v_a.shape[0]
    e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a / math.sqrt(d)
    e = e - np.max(e)
    alpha = np.exp(e) / np.sum(np.exp(e))
    return alpha @ h, alpha
