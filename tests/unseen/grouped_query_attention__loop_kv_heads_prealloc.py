"""BUG: none
STYLE: a loop over KV heads, baddbmm, preallocated outputs
"""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    _, Hkv, Tk, _ = keys.shape
    dv = values.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("number of query heads must be divisible by number of key/value heads")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    out = queries.new_empty(B, Hq, Tq, dv)
    weights = queries.new_empty(B, Hq, Tq, Tk)
    full_mask = None if mask is None else mask.expand(B, Hq, Tq, Tk)
    for j in range(Hkv):
        heads = slice(j * G, (j + 1) * G)
        qj = queries[:, heads].reshape(B, G * Tq, d)
        kj, vj = keys[:, j], values[:, j]                              # views, no repeat
        s = torch.baddbmm(qj.new_zeros(()).expand(B, G * Tq, Tk), qj, kj.transpose(1, 2), alpha=scale)
        if full_mask is not None:
            allowed = full_mask[:, heads].reshape(B, G * Tq, Tk)
            s = s.masked_fill(~allowed, -1e30 if s.dtype != torch.float16 else -6e4)
            p = torch.softmax(s, -1) * allowed
        else:
            p = torch.softmax(s, -1)
        weights[:, heads] = p.view(B, G, Tq, Tk)
        out[:, heads] = torch.bmm(p, vj).view(B, G, Tq, dv)
    return out, weights
