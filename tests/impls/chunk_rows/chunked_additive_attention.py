"""Blocks of whole query rows (all batch rows at once) when they fit; otherwise one query row at a time,
with its keys in blocks."""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be >= h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q, k, w = queries @ W_q.T, keys @ W_k.T, w_v[0]
    rows = max_elements // (B * Tk * h)
    if rows >= 1:
        parts = [torch.tanh(q[:, i:i + rows, None, :] + k[:, None]) @ w for i in range(0, Tq, rows)]
        scores = torch.cat(parts, dim=1)
    else:
        kb = max_elements // h
        scores = torch.stack([
            torch.stack([torch.cat([torch.tanh(q[b, i] + k[b, j:j + kb]) @ w for j in range(0, Tk, kb)])
                         for i in range(Tq)])
            for b in range(B)])
    weights = masked_softmax(scores, valid_lens)
    return weights @ values, weights
