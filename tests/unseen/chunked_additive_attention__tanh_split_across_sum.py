"""BUG: "avoids" the 4-D tensor by distributing w_v over the tanh, scoring w_v.tanh(W_q q_i) + w_v.tanh(W_k k_j), which is not w_v.tanh(W_q q_i + W_k k_j).
STAGE: the scores
"""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements < h")

    qp = queries @ W_q.T  # (B, Tq, h)
    kp = keys @ W_k.T  # (B, Tk, h)

    # w_v . tanh(a + b) computed as two (B, T) terms: no (B, Tq, Tk, h) tensor at all
    q_term = torch.tanh(qp) @ w_v.T  # (B, Tq, 1)
    k_term = torch.tanh(kp) @ w_v.T  # (B, Tk, 1)
    scores = q_term + k_term.transpose(1, 2)  # (B, Tq, Tk)

    weights = masked_softmax(scores, valid_lens)
    return weights @ values, weights
