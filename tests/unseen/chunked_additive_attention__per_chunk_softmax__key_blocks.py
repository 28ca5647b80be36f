"""Keys in blocks; each block's scores go through their own masked softmax: blocks never normalised together."""
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
    if valid_lens is None:
        lens = torch.full((B, Tq), Tk, device=queries.device)
    else:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
    parts = []
    for j0 in range(0, Tk, block):
        s = torch.tanh(q[:, :, None, :] + k[:, None, j0:j0 + block, :]) @ w_v[0]
        local = (lens - j0).clamp(0, s.shape[-1])
        parts.append(masked_softmax(s, local))
    weights = torch.cat(parts, dim=-1)
    return weights @ values, weights
