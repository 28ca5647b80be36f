"""BUG: none
STYLE: np.einsum everywhere, softmax as exp(e - logsumexp(e)) with the log-sum-exp done by hand
"""
import numpy as np


def _logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    Ws = np.einsum("dn,n->d", W_a, s_prev)
    Uh = np.einsum("dk,tk->td", U_a, h)
    e = np.einsum("td,d->t", np.tanh(Uh + Ws), v_a)
    alpha = np.exp(e - _logsumexp(e))
    context = np.einsum("t,tk->k", alpha, h)
    return context, alpha
