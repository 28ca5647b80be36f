"""BUG: none
STYLE: blocks of keys against all queries written into a preallocated score tensor with slice assignment (autograd-safe CopySlices).
"""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    B, Tq, _ = queries.shape
    _, Tk, _ = keys.shape
    h = W_k.shape[0]
    if max_elements < h:
        raise ValueError("max_elements (%d) < attention size h (%d)" % (max_elements, h))

    Q = torch.matmul(queries, W_q.t()).unsqueeze(2)  # (B, Tq, 1, h)
    K = torch.matmul(keys, W_k.t()).unsqueeze(1)  # (B, 1, Tk, h)
    v_a = w_v.squeeze(0)  # (h,)

    # B * Tq * h is always inside the bound, so at least one key per block is allowed
    block = max(1, max_elements // (B * Tq * h))

    scores = queries.new_empty((B, Tq, Tk))
    for start in range(0, Tk, block):
        stop = min(start + block, Tk)
        hidden = torch.tanh(Q + K[:, :, start:stop])  # (B, Tq, block, h)
        scores[:, :, start:stop] = torch.matmul(hidden, v_a)

    attn = masked_softmax(scores, valid_lens)
    return torch.bmm(attn, values), attn
