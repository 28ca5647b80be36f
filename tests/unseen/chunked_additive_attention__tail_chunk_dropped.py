"""STYLE: memory-bounded additive attention, chunking over keys (num_chunks = Tk // chunk)
BUG: the number of key chunks is Tk // chunk, so the keys of a last partial chunk never get a score (they keep the initial 0).
STAGE: scores
WHEN: small max_elements with B*Tq*h <= max_elements, where the key chunk max_elements // (B*Tq*h) is smaller than Tk and does not divide it (the default 2**20 is right on small inputs)
"""
import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError(f"max_elements ({max_elements}) must be at least h ({h})")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qp = queries @ W_q.T  # (B, Tq, h)
    kp = keys @ W_k.T  # (B, Tk, h)
    wv = w_v.reshape(h)

    scores = queries.new_zeros(B, Tq, Tk)
    if B * Tq * h <= max_elements:
        chunk = max(1, max_elements // (B * Tq * h))
        num_chunks = max(1, Tk // chunk)
        for c in range(num_chunks):
            j0, j1 = c * chunk, min((c + 1) * chunk, Tk)
            feats = torch.tanh(qp[:, :, None, :] + kp[:, None, j0:j1, :])  # (B, Tq, chunk, h)
            scores[:, :, j0:j1] = feats @ wv
    else:
        # one (query, key) column at a time is still too big: go row by row
        rows = max(1, max_elements // h)
        flat_q = qp.reshape(B * Tq, h)
        for j in range(Tk):
            for r0 in range(0, B * Tq, rows):
                r1 = min(r0 + rows, B * Tq)
                b = torch.arange(r0, r1, device=queries.device) // Tq
                feats = torch.tanh(flat_q[r0:r1] + kp[b, j])
                scores.view(B * Tq, Tk)[r0:r1, j] = feats @ wv

    if valid_lens is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(Tk, device=scores.device) < lens[..., None]
        weights = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1) * keep
    return weights @ values, weights
