"""BUG: softmax without subtracting the maximum: exp(e) overflows to inf for e of order 1e3..1e4 (float64 overflows above ~709, float32 above ~88) and alpha becomes NaN. Differs on: |e_j| large, e.g. v_a scaled so that |e_j| ~ 1e4 (the contract's stability range).
STAGE: exp(e) (inf) -> alpha
STYLE: textbook Bahdanau step, naive softmax np.exp(e) / np.sum(np.exp(e))
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a
    with np.errstate(over="ignore", invalid="ignore"):
        alpha = np.exp(e) / np.sum(np.exp(e))
    context = alpha @ h
    return context, alpha
