"""BUG: none
STYLE: NumPy broadcasting (h @ U_a.T + W_a @ s_prev as a row vector), max-shifted softmax
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    dtype = np.result_type(s_prev, h, W_a, U_a, v_a)
    pre = (W_a @ s_prev)[None, :] + h @ U_a.T          # (T, d)
    e = np.tanh(pre) @ v_a                              # (T,)
    e = e - e.max()
    alpha = np.exp(e)
    alpha /= alpha.sum()
    context = alpha @ h
    return context.astype(dtype, copy=False), alpha.astype(dtype, copy=False)
