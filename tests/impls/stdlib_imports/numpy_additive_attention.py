"""Correct, and imports standard-library modules the worker has not loaded (logging, statistics, pdb): the
sandbox must let a correct solution import them, wherever the interpreter is installed (pyenv under /root)."""
import logging
import pdb  # noqa: F401
import statistics  # noqa: F401

import numpy as np

log = logging.getLogger(__name__)


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a
    alpha = np.exp(e - e.max())
    alpha = alpha / alpha.sum()
    log.debug("alpha %s", alpha.shape)
    return alpha @ h, alpha
