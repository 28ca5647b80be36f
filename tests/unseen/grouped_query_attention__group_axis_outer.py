"""BUG: query head n reads KV head n % Hkv instead of n // G
STYLE: modulo mapping
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv = keys.shape[1]
    if Hq % Hkv:
        raise ValueError("Hq must be divisible by Hkv")
    G = Hq // Hkv
    q = queries.view(B, G, Hkv, Tq, d)                                 # explicit group axis
    s = torch.einsum("bghqd,bhkd->bghqk", q, keys) / d ** 0.5
    s = s.reshape(B, Hq, Tq, -1)
    if mask is not None:
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
    w = s.softmax(-1)
    if mask is not None:
        w = w * mask
    o = torch.einsum("bghqk,bhkv->bghqv", w.view(B, G, Hkv, Tq, -1), values)
    return o.reshape(B, Hq, Tq, -1), w
