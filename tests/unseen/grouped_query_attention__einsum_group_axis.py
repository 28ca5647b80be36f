"""BUG: none
STYLE: einsum over an explicit group axis (b, kv-head, g, q): K and V are never expanded; masks applied with torch.where.
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    b, hq, tq, d = queries.shape
    hkv = keys.shape[1]
    if hq % hkv:
        raise ValueError("Hq must be divisible by Hkv")
    g = hq // hkv

    q = queries.view(b, hkv, g, tq, d) if queries.is_contiguous() else queries.reshape(b, hkv, g, tq, d)
    logits = torch.einsum("bhgqd,bhkd->bhgqk", q, keys) * d ** -0.5
    logits = logits.reshape(b, hq, tq, keys.shape[2])

    if mask is not None:
        logits = torch.where(mask, logits, torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device))
    probs = logits.softmax(dim=-1)
    if mask is not None:
        probs = torch.where(mask.any(dim=-1, keepdim=True), probs, torch.zeros((), dtype=probs.dtype, device=probs.device))

    out = torch.einsum("bhgqk,bhkv->bhgqv", probs.reshape(b, hkv, g, tq, -1), values)
    return out.reshape(b, hq, tq, values.shape[-1]), probs
