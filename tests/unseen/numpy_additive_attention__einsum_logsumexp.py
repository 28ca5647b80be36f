"""BUG: none
STYLE: einsum for every contraction and the softmax through a log-sum-exp (log-domain normalisation).
"""
import numpy as np


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    pre = np.einsum("dn,n->d", W_a, s_prev)[None, :] + np.einsum("dm,tm->td", U_a, h)
    energies = np.einsum("td,d->t", np.tanh(pre), v_a)
    m = energies.max()
    log_z = m + np.log(np.sum(np.exp(energies - m)))
    alpha = np.exp(energies - log_z)
    context = np.einsum("t,tm->m", alpha, h)
    return context, alpha
