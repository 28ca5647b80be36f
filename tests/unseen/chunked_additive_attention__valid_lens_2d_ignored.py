"""STYLE: chunking over query rows with torch.split, d2l-style masking written for 1-D valid_lens
BUG: only 1-D valid_lens is applied; a 2-D (B, Tq) valid_lens falls through and no key is masked.
STAGE: masked scores
WHEN: valid_lens 2-D
"""
import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2**20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be >= h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    q = torch.matmul(queries, W_q.t())  # (B, Tq, h)
    k = torch.matmul(keys, W_k.t())  # (B, Tk, h)

    # one (query, key-block) slab at a time: (B, 1, kb, h) elements
    kb = max(1, min(Tk, max_elements // (B * h)))
    if B * kb * h > max_elements:
        kb = 0
    rows = []
    for qi in torch.split(q, 1, dim=1):  # (B, 1, h)
        if kb:
            parts = [torch.tanh(qi[:, :, None, :] + kj[:, None]).matmul(w_v[0]) for kj in torch.split(k, kb, dim=1)]
        else:
            parts = []
            for j in range(Tk):
                col = torch.stack([torch.tanh(qi[b, 0] + k[b, j]) @ w_v[0] for b in range(B)])
                parts.append(col.view(B, 1, 1))
        rows.append(torch.cat(parts, dim=-1))  # (B, 1, Tk)
    scores = torch.cat(rows, dim=1)  # (B, Tq, Tk)

    if valid_lens is not None and valid_lens.dim() == 1:
        keep = torch.arange(Tk, device=scores.device)[None, None, :] < valid_lens[:, None, None]
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1) * keep
    else:
        weights = torch.softmax(scores, dim=-1)
    return torch.bmm(weights, values), weights
