"""BUG: none
STYLE: a loop over positions and np.logaddexp.reduce
"""
"""Bahdanau attention step written the way the paper states it: one energy e_j per source
position (a loop with np.dot), normalised through a log-sum-exp (np.logaddexp.reduce), so the
exponentials never overflow. The energies are kept in the inputs' dtype.
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    T = h.shape[0]
    Ws = np.dot(W_a, s_prev)
    e = np.empty(T, dtype=h.dtype)
    for j in range(T):
        e[j] = np.dot(v_a, np.tanh(Ws + np.dot(U_a, h[j])))
    log_z = np.logaddexp.reduce(e)
    alpha = np.exp(e - log_z)
    context = np.sum(alpha[:, np.newaxis] * h, axis=0)
    return context, alpha
