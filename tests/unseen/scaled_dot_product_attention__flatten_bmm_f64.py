"""BUG: none
STYLE: leading dims flattened, bmm in float64, an in-place div_ on a fresh tensor
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    q = queries.reshape(-1, Tq, d).to(torch.float64)
    k = keys.reshape(-1, Tk, d).to(torch.float64)
    v = values.reshape(-1, Tk, dv).to(torch.float64)
    scores = torch.bmm(q, k.transpose(1, 2)).div_(math.sqrt(d))      # in place on a fresh tensor
    if mask is None:
        allowed = torch.ones_like(scores, dtype=torch.bool)
    else:
        allowed = mask.expand(*lead, Tq, Tk).reshape(-1, Tq, Tk)
    neg = torch.tensor(-math.inf, dtype=scores.dtype, device=scores.device)
    s = torch.where(allowed, scores, neg)
    m = s.max(dim=-1, keepdim=True).values
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)
    p = torch.exp(s - m)
    z = p.sum(-1, keepdim=True)
    w = p / z.clamp(min=1e-300)
    out = torch.bmm(w, v)
    return (out.reshape(*lead, Tq, dv).to(queries.dtype),
            w.reshape(*lead, Tq, Tk).to(queries.dtype))
