"""BUG: none
STYLE: blocks of query rows against all keys (a (B, 1, Tk, h) block always fits, since B*Tk*h counts in the bound), einsum with w_v, torch.split over queries.
"""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.size(0)
    if max_elements < h:
        raise ValueError("max_elements must be at least h")
    batch_size, num_keys = keys.shape[0], keys.shape[1]

    q = torch.einsum("bqi,hi->bqh", queries, W_q)
    k = torch.einsum("bki,hi->bkh", keys, W_k)
    w = w_v.reshape(-1)

    rows_per_block = max(1, max_elements // (batch_size * num_keys * h))

    score_blocks = []
    for q_block in torch.split(q, rows_per_block, dim=1):
        features = torch.tanh(q_block[:, :, None, :] + k[:, None, :, :])
        score_blocks.append(torch.einsum("bqkh,h->bqk", features, w))
    scores = torch.cat(score_blocks, dim=1)

    weights = masked_softmax(scores, valid_lens)
    output = torch.einsum("bqk,bkv->bqv", weights, values)
    return output, weights
