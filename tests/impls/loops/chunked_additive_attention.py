import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    """One (batch, query) row at a time, its keys in blocks of max_elements // h."""
    h = W_k.shape[0]
    if h > max_elements:
        raise ValueError("max_elements must be at least h")
    q, k = queries @ W_q.t(), keys @ W_k.t()
    block = max_elements // h
    rows = []
    for b in range(q.shape[0]):
        for i in range(q.shape[1]):
            parts = [torch.tanh(q[b, i] + k[b, s:s + block]) @ w_v.squeeze(0) for s in range(0, k.shape[1], block)]
            rows.append(torch.cat(parts))
    scores = torch.stack(rows).view(q.shape[0], q.shape[1], k.shape[1])
    weights = masked_softmax(scores, valid_lens)
    return weights @ values, weights
