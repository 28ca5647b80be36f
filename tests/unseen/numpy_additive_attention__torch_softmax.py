"""BUG: the softmax is delegated to torch ("it is numerically safe"), so the module imports torch although the problem must be NumPy only.
STAGE: the softmax
"""
import numpy as np
import torch


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.tanh(h @ U_a.T + W_a @ s_prev) @ v_a
    alpha = torch.softmax(torch.from_numpy(np.ascontiguousarray(e)), dim=0).numpy()
    context = alpha @ h
    return context, alpha
