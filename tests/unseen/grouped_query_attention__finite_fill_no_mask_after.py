"""Fills masked scores with finfo.min and takes a max-subtracted softmax. BUG: a row with no allowed key comes out uniform (1/Tk), not zero."""
import math
import torch


def _msoftmax(s, allowed):
    if allowed is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv, Tk = keys.shape[1], keys.shape[2]
    dv = values.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq must be divisible by Hkv")
    G = Hq // Hkv
    qg = queries.reshape(B, Hkv, G, Tq, d)
    s = torch.einsum("bhgqd,bhkd->bhgqk", qg, keys) / math.sqrt(d)
    s = s.reshape(B, Hq, Tq, Tk)
    w = _msoftmax(s, mask)
    out = torch.einsum("bhgqk,bhkv->bhgqv", w.reshape(B, Hkv, G, Tq, Tk), values)
    return out.reshape(B, Hq, Tq, dv), w
