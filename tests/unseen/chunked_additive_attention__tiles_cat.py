"""BUG: none
STYLE: 2-D tiling (batch row, query tile, key tile) sized from max_elements, tiles assembled with torch.cat/stack; d2l-style masked softmax (fixed) on the (B, Tq, Tk) scores
"""
import torch
from torch import nn


def _masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    X = X.masked_fill(~mask, torch.finfo(X.dtype).min)
    return (nn.functional.softmax(X, dim=-1) * mask).reshape(shape)


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None,
                               max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements={max_elements} is smaller than attn size h={h}")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    pq = queries @ W_q.T            # (B, Tq, h)
    pk = keys @ W_k.T               # (B, Tk, h)
    wv = w_v[0]                     # (h,)
    cj = max(1, min(Tk, max_elements // h))
    ci = max(1, min(Tq, max_elements // (cj * h)))
    batch_rows = []
    for b in range(B):
        q_tiles = []
        for i0 in range(0, Tq, ci):
            k_tiles = []
            for j0 in range(0, Tk, cj):
                feat = torch.tanh(pq[b, i0:i0 + ci, None, :] + pk[b, None, j0:j0 + cj, :])
                k_tiles.append(feat @ wv)                       # (ci, cj)
            q_tiles.append(torch.cat(k_tiles, dim=1))
        batch_rows.append(torch.cat(q_tiles, dim=0))
    scores = torch.stack(batch_rows, dim=0)                      # (B, Tq, Tk)
    weights = _masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
