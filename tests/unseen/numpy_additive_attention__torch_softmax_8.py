"""BUG: imports torch for the softmax
STYLE: torch softmax
"""
"""Bahdanau attention step, NumPy for the algebra but torch.softmax for a stable softmax
(ported from a PyTorch model).

BUG: the module imports torch, which the NumPy problem forbids (checked in a fresh interpreter).
The values and dtypes are right.
"""
import numpy as np
import torch


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a
    alpha = torch.softmax(torch.from_numpy(np.ascontiguousarray(e)), dim=0).numpy()
    return (alpha @ h).astype(h.dtype), alpha.astype(h.dtype)
