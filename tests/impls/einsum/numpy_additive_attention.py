import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.einsum("d,td->t", v_a, np.tanh(np.einsum("dn,n->d", W_a, s_prev)[None] + np.einsum("dn,tn->td", U_a, h)))
    shifted = np.exp(e - np.max(e, keepdims=True))
    alpha = shifted / np.sum(shifted, keepdims=True)
    return np.einsum("t,tn->n", alpha, h), alpha
