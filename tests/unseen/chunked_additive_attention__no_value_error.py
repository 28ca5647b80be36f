"""BUG: never raises ValueError for max_elements < h; it silently runs one query row at a time instead.
STAGE: the argument check
"""
import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.size(0)
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
