"""BUG: none
STYLE: literal transcription of the Bahdanau equations: a Python loop over encoder steps j computing e_j, then a numerically stable softmax and a loop-free weighted sum; output arrays allocated in the inputs' dtype.
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    T = h.shape[0]
    dtype = np.result_type(s_prev, h, W_a, U_a, v_a)
    Ws = np.dot(W_a, s_prev)                 # computed once, shared by all j
    e = np.empty(T, dtype=dtype)
    for j in range(T):
        e[j] = np.dot(v_a, np.tanh(Ws + np.dot(U_a, h[j])))
    e_max = e.max()
    exp_e = np.exp(e - e_max)
    alpha = exp_e / exp_e.sum()
    context = np.zeros(h.shape[1], dtype=dtype)
    for j in range(T):
        context = context + alpha[j] * h[j]
    return context, alpha
