"""Reference: additive attention that never builds the full (B, Tq, Tk, h) tensor."""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    """queries (B, Tq, dq), keys (B, Tk, dk), values (B, Tk, dv); W_q (h, dq), W_k (h, dk), w_v (1, h)."""
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements={max_elements} is smaller than h={h}: not even one (query, key) pair fits")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q = (queries @ W_q.T).reshape(B * Tq, h)  # row b*Tq + i is W_q q_i of batch row b
    k = (keys @ W_k.T).reshape(B * Tk, h)
    pairs = B * Tq * Tk  # the (b, i, j) triples, in row-major order
    step = max_elements // h  # triples per chunk: a chunk's features are (step, h)
    scores = []
    for start in range(0, pairs, step):
        idx = torch.arange(start, min(start + step, pairs), device=queries.device)
        b, i, j = idx // (Tq * Tk), idx // Tk % Tq, idx % Tk
        features = torch.tanh(q[b * Tq + i] + k[b * Tk + j])  # (chunk, h)
        scores.append(features @ w_v[0])  # (chunk,)
    weights = masked_softmax(torch.cat(scores).reshape(B, Tq, Tk), valid_lens)
    return torch.bmm(weights, values), weights
