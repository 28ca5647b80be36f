"""Guesses a 3-D mask's layout from its leading size. BUG: a mask (Hq, Tq, Tk) is read as per-batch (B, Tq, Tk) whenever its leading size equals B."""
import math
import torch


def _msoftmax(s, allowed):
    if allowed is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~allowed, float("-inf"))
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
    if mask is not None and mask.dim() == 3 and mask.shape[0] == B:
        mask = mask[:, None]
    w = _msoftmax(s, mask)
    out = torch.einsum("bhgqk,bhkv->bhgqv", w.reshape(B, Hkv, G, Tq, Tk), values)
    return out.reshape(B, Hq, Tq, dv), w
