"""STYLE: competitive-programming terse NumPy (one-letter names, log-sum-exp normalisation)
BUG: none
STAGE: none
WHEN: never (correct on every contract input)
"""
import numpy as np


def additive_attention_step(s, H, W, U, v):
    e = np.tanh(H @ U.T + W @ s) @ v
    z = e - e.max()
    a = np.exp(z - np.log(np.exp(z).sum()))
    return a @ H, a
