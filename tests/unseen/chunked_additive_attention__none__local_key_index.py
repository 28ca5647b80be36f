"""Keys in blocks; valid_len compared with the key's index inside its block, not its index in the row."""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be at least h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q, k = queries @ W_q.T, keys @ W_k.T
    block = max(1, max_elements // (B * Tq * h))
    parts = []
    for j0 in range(0, Tk, block):
        s = torch.tanh(q[:, :, None, :] + k[:, None, j0:j0 + block, :]) @ w_v[0]
        if valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
            s = s.masked_fill(torch.arange(s.shape[-1]) >= lens[..., None], -1e30)
        parts.append(s)
    scores = torch.cat(parts, dim=-1)
    weights = torch.softmax(scores, dim=-1)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
        weights = weights * (lens[..., None] > 0)
    return weights @ values, weights
