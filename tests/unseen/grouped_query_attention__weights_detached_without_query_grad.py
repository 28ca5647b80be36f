"""The weights are detached when the queries do not require grad, so keys and values get wrong gradients.
BUG: the weights are detached when the queries do not require grad, so keys and values get wrong gradients."""
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
    w = _msoftmax(s, mask)
    if not queries.requires_grad:
        w = w.detach()
    out = torch.einsum("bhgqk,bhkv->bhgqv", w.reshape(B, Hkv, G, Tq, Tk), values)
    return out.reshape(B, Hq, Tq, dv), w
