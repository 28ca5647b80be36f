"""Chunks of (b, i, j) triples computed in float64, cast back at the end."""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements ({max_elements}) < h ({h})")
    dt = queries.dtype
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q = (queries.double() @ W_q.double().T).reshape(-1, h)
    k = (keys.double() @ W_k.double().T).reshape(-1, h)
    n = B * Tq * Tk
    step = max_elements // h
    parts = []
    for s in range(0, n, step):
        t = torch.arange(s, min(n, s + step), device=queries.device)
        b, r = t // (Tq * Tk), t % (Tq * Tk)
        parts.append(torch.tanh(q[b * Tq + r // Tk] + k[b * Tk + r % Tk]) @ w_v.double()[0])
    weights = masked_softmax(torch.cat(parts).view(B, Tq, Tk).to(dt), valid_lens)
    return weights @ values, weights
