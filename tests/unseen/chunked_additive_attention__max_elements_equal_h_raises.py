"""BUG: max_elements <= h refused: max_elements == h must work
STYLE: rows by budget
"""
"""Chunked additive attention (row chunks, key chunks when a row does not fit).

BUG: the argument check is `max_elements <= h`, so max_elements == h, the smallest budget the
contract requires to work (one key's h features at a time), raises ValueError.
"""
import math

import torch


def chunked_additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens=None, max_elements=2 ** 20):
    h = W_q.shape[0]
    if max_elements <= h:
        raise ValueError(f"max_elements must exceed h={h}")
    B, Tq, _ = queries.shape
    Tk = keys.shape[1]
    qp = torch.einsum("bqd,hd->bqh", queries, W_q)
    kp = torch.einsum("bkd,hd->bkh", keys, W_k)
    scores = queries.new_zeros(B, Tq, Tk)
    kc = max(1, min(Tk, max_elements // (B * h)))
    for i in range(Tq):
        for j0 in range(0, Tk, kc):
            f = torch.tanh(qp[:, i, None, :] + kp[:, j0:j0 + kc, :])       # (B, kc, h)
            scores[:, i, j0:j0 + kc] = torch.einsum("bkh,h->bk", f, w_v[0])
    if valid_lens is None:
        allowed = torch.ones_like(scores, dtype=torch.bool)
    elif valid_lens.dim() == 1:
        allowed = (torch.arange(Tk, device=scores.device)[None, None] < valid_lens[:, None, None]).expand(B, Tq, Tk)
    else:
        allowed = torch.arange(Tk, device=scores.device)[None, None] < valid_lens[:, :, None]
    s = torch.where(allowed, scores, torch.tensor(-math.inf, dtype=scores.dtype, device=scores.device))
    mx = s.amax(-1, keepdim=True).detach()
    mx = torch.where(mx == -math.inf, torch.zeros_like(mx), mx)
    e = torch.where(allowed, (s - mx).exp(), torch.zeros_like(s))
    den = e.sum(-1, keepdim=True)
    w = e / torch.where(den == 0, torch.ones_like(den), den)
    return w @ values, w
