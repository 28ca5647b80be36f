"""Blocks of max_elements // (Tk*h) query rows; the last, partial block is dropped."""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements < h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q, k = queries @ W_q.T, keys @ W_k.T
    rows = max(1, max_elements // (Tk * h))
    scores = torch.zeros(B, Tq, Tk, dtype=queries.dtype, device=queries.device)
    for start in range(0, Tq - Tq % rows, rows):
        block = torch.tanh(q[:, start:start + rows, None, :] + k[:, None, :, :]) @ w_v[0]
        scores[:, start:start + rows] = block
    weights = masked_softmax(scores, valid_lens)
    return weights @ values, weights
