"""STYLE: Coursera/deeplearning.ai NMT-with-attention assignment in NumPy (one_step_attention, plain softmax)
BUG: the softmax is exp(e) / sum(exp(e)) without subtracting the max, so large scores overflow to inf and give NaN.
STAGE: weights
WHEN: scores e_j above ~88 (float32) or ~709 (float64), e.g. a large v_a
"""
import numpy as np


def softmax(x):
    e_x = np.exp(x)
    return e_x / np.sum(e_x)


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    Tx = h.shape[0]
    energies = np.empty(Tx, dtype=h.dtype)
    Ws = W_a.dot(s_prev)  # (d,)
    for t in range(Tx):
        energies[t] = v_a.dot(np.tanh(Ws + U_a.dot(h[t])))
    alphas = softmax(energies)
    context = np.dot(alphas, h)
    return context, alphas
