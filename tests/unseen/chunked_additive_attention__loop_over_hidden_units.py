"""BUG: none
STYLE: unusual but valid: accumulates the score over the h hidden units one at a time, so every temporary is (B, Tq, Tk) and max_elements never needs consulting beyond the h check.
"""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements < h")

    qp = queries @ W_q.T  # (B, Tq, h)
    kp = keys @ W_k.T  # (B, Tk, h)

    # score[b, i, j] = sum_u w_v[u] * tanh(qp[b, i, u] + kp[b, j, u])
    scores = None
    for u in range(h):
        term = w_v[0, u] * torch.tanh(qp[:, :, u, None] + kp[:, None, :, u])  # (B, Tq, Tk)
        scores = term if scores is None else scores + term

    weights = masked_softmax(scores, valid_lens)
    return weights @ values, weights
