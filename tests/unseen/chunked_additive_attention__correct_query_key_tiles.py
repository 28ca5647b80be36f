"""STYLE: 2-D tiling over (query block, key block) per batch row, writing into a preallocated score matrix (engineer's memory-bounded kernel in PyTorch)
BUG: none
STAGE: none
WHEN: never
"""
import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"chunked_additive_attention: max_elements={max_elements} < h={h}")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    proj_q = queries @ W_q.T  # (B, Tq, h)
    proj_k = keys @ W_k.T  # (B, Tk, h)
    v = w_v.reshape(-1)  # (h,)

    # tile sizes: a (tq, tk, h) feature block never exceeds max_elements
    tk = max(1, min(Tk, max_elements // h))
    tq = max(1, min(Tq, max_elements // (tk * h)))

    scores = torch.empty(B, Tq, Tk, dtype=proj_q.dtype, device=queries.device)
    for b in range(B):
        for i0 in range(0, Tq, tq):
            qb = proj_q[b, i0:i0 + tq]  # (tq, h)
            for j0 in range(0, Tk, tk):
                kb = proj_k[b, j0:j0 + tk]  # (tk, h)
                feats = torch.tanh(qb[:, None, :] + kb[None, :, :])  # (tq, tk, h)
                scores[b, i0:i0 + tq, j0:j0 + tk] = feats @ v

    if valid_lens is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        lens = valid_lens.reshape(B, -1, 1)  # (B, 1|Tq, 1)
        keep = torch.arange(Tk, device=scores.device) < lens
        weights = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
        weights = weights.masked_fill(~keep, 0.0)
    return torch.bmm(weights, values), weights
