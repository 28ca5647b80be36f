"""BUG: none
STYLE: leading dims flattened into one batch for torch.bmm, softmax written as exp(s - logsumexp(s)).
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    *lead, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dv = values.shape[-1]

    q = queries.reshape(-1, Tq, d)
    k = keys.reshape(-1, Tk, d)
    v = values.reshape(-1, Tk, dv)

    s = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(d))
    if mask is not None:
        m = mask.to(torch.bool).expand(*lead, Tq, Tk).reshape(-1, Tq, Tk)
        s = s.masked_fill(~m, float("-inf"))
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        empty = ~m.any(dim=-1, keepdim=True)
        lse = lse.masked_fill(empty, 0.0)
        p = torch.exp(s - lse)
    else:
        p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))

    o = torch.bmm(p, v)
    return o.reshape(*lead, Tq, dv), p.reshape(*lead, Tq, Tk)
