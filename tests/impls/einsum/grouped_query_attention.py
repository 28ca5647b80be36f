"""GQA with an explicit group axis and einsum (no copy of K/V)."""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    b, hq, tq, d = queries.shape
    hkv = keys.shape[1]
    if hq % hkv != 0:
        raise ValueError(f"num query heads {hq} must be divisible by num kv heads {hkv}")
    g = hq // hkv
    q = queries.view(b, hkv, g, tq, d)
    s = torch.einsum("bhgqd,bhkd->bhgqk", q, keys) / math.sqrt(d)
    s = s.reshape(b, hq, tq, -1)
    if mask is not None:
        s = torch.where(mask, s, torch.finfo(s.dtype).min)
    w = torch.softmax(s, dim=-1)
    if mask is not None:
        w = torch.where(mask, w, torch.zeros((), dtype=w.dtype, device=w.device))
    out = torch.einsum("bhgqk,bhkv->bhgqv", w.view(b, hkv, g, tq, -1), values)
    return out.reshape(b, hq, tq, -1), w
