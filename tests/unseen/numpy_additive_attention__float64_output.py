"""BUG: the energies are accumulated in np.zeros(T) (default float64) in a per-step loop, so for float32 inputs alpha and context come back as float64 arrays. Differs on: float32 inputs (dtype of both results); float64 inputs are right.
STAGE: e (dtype float64 instead of the inputs' dtype)
STYLE: explicit loop over encoder steps, as in lecture notes / Bahdanau pseudo-code
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    T = h.shape[0]
    Ws = W_a.dot(s_prev)
    e = np.zeros(T)
    for j in range(T):
        e[j] = v_a.dot(np.tanh(Ws + U_a.dot(h[j])))
    e_max = e.max()
    alpha = np.exp(e - e_max)
    alpha = alpha / alpha.sum()
    context = np.zeros(h.shape[1])
    for j in range(T):
        context += alpha[j] * h[j]
    return context, alpha
