import torch

from .masked_softmax import masked_softmax


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    """Blocks of r query rows x c keys, r * c * h <= max_elements."""
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements ({max_elements}) < h ({h})")
    B, Tq, Tk = queries.shape[0], queries.shape[1], keys.shape[1]
    q = torch.einsum("btd,hd->bth", queries, W_q).reshape(B * Tq, h)
    k = torch.einsum("btd,hd->bth", keys, W_k)
    c = min(Tk, max_elements // h)
    r = max(1, max_elements // (c * h))
    batch_of_row = torch.arange(B * Tq, device=queries.device) // Tq
    blocks = []
    for r0 in range(0, B * Tq, r):
        rows = slice(r0, min(r0 + r, B * Tq))
        cols = []
        for c0 in range(0, Tk, c):
            kb = k[batch_of_row[rows], c0:c0 + c]  # (r, c, h)
            cols.append(torch.einsum("rch,h->rc", torch.tanh(q[rows, None] + kb), w_v[0]))
        blocks.append(torch.cat(cols, dim=1))
    weights = masked_softmax(torch.cat(blocks).reshape(B, Tq, Tk), valid_lens)
    return torch.einsum("bqk,bkv->bqv", weights, values), weights
