"""BUG: none
STYLE: matrix-vector form, a max-subtracted softmax, results in the inputs' dtype
"""
"""One decoder step of Bahdanau attention in NumPy, matrix-vector form:
e = tanh(W_a s + h U_a^T) v_a, alpha = softmax(e) (max subtracted), context = alpha h.
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    dtype = np.result_type(s_prev, h, W_a, U_a, v_a)
    proj_s = W_a @ s_prev                      # (d,)
    proj_h = h @ U_a.T                         # (T, d)
    e = np.tanh(proj_s[None, :] + proj_h) @ v_a
    e = e - e.max()
    w = np.exp(e)
    alpha = w / w.sum()
    context = alpha @ h
    return context.astype(dtype, copy=False), alpha.astype(dtype, copy=False)
