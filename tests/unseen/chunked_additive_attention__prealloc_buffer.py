"""BUG: none
STYLE: preallocated score buffer filled slice by slice (key chunks outer, query chunks inner, the other loop order), autograd through the slice assignments (CopySlices); masked softmax with a hand-written log-sum-exp and torch.where
"""
import math

import torch


def _masked_softmax(scores, valid_lens):
    B, Tq, Tk = scores.shape
    if valid_lens is None:
        keep = torch.ones(1, 1, Tk, dtype=torch.bool, device=scores.device)
    else:
        lens = valid_lens.view(B, 1) if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(Tk, device=scores.device).view(1, 1, Tk) < lens.unsqueeze(-1)
    ninf = torch.full((), -math.inf, dtype=scores.dtype, device=scores.device)
    m = torch.where(keep, scores, ninf).amax(-1, keepdim=True).detach()
    m = torch.nan_to_num(m, neginf=0.0)
    z = torch.where(keep, scores - m, ninf)
    p = torch.exp(z)
    s = p.sum(-1, keepdim=True)
    return p / torch.where(s == 0, torch.ones_like(s), s)


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None,
                               max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements < h:
        raise ValueError("max_elements must be at least the attention size h")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qh = torch.matmul(queries, W_q.t())
    kh = torch.matmul(keys, W_k.t())
    scores = queries.new_empty(B, Tq, Tk)
    budget = max_elements // h                     # (query, key) pairs per chunk
    kc = max(1, min(Tk, budget))
    qc = max(1, min(Tq, budget // kc))
    for b in range(B):
        for j0 in range(0, Tk, kc):
            j1 = min(Tk, j0 + kc)
            for i0 in range(0, Tq, qc):
                i1 = min(Tq, i0 + qc)
                f = torch.tanh(qh[b, i0:i1].unsqueeze(1) + kh[b, j0:j1].unsqueeze(0))
                scores[b, i0:i1, j0:j1] = torch.matmul(f, w_v.t()).squeeze(-1)
    weights = _masked_softmax(scores, valid_lens)
    return torch.matmul(weights, values), weights
