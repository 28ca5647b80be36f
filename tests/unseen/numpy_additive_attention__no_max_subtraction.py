"""BUG: no maximum subtracted: NaN once energies reach ~1e4
STYLE: matvec
"""
"""Bahdanau attention step, textbook softmax exp(e) / sum(exp(e)).

BUG: no max subtraction; with energies of magnitude ~1e4 (the contract's range) exp overflows to
inf and alpha becomes NaN (or underflows to 0/0). Small energies are right.
"""
import numpy as np


def softmax(x):
    ex = np.exp(x)
    return ex / np.sum(ex)


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    energies = np.tanh(W_a @ s_prev + (U_a @ h.T).T) @ v_a
    alpha = softmax(energies)
    return alpha @ h, alpha
