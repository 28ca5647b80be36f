"""BUG: views the query heads as (g, kv-head) instead of (kv-head, g), so query head n uses key/value head n % Hkv rather than n // G.
STAGE: the head grouping
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    b, hq, tq, d = queries.shape
    hkv = keys.shape[1]
    if hq % hkv:
        raise ValueError("Hq must be divisible by Hkv")
    g = hq // hkv

    q = queries.view(b, g, hkv, tq, d) if queries.is_contiguous() else queries.reshape(b, g, hkv, tq, d)
    logits = torch.einsum("bghqd,bhkd->bghqk", q, keys) * d ** -0.5
    logits = logits.reshape(b, hq, tq, keys.shape[2])

    if mask is not None:
        logits = torch.where(mask, logits, torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device))
    probs = logits.softmax(dim=-1)
    if mask is not None:
        probs = torch.where(mask.any(dim=-1, keepdim=True), probs, torch.zeros((), dtype=probs.dtype, device=probs.device))

    out = torch.einsum("bghqk,bhkv->bghqv", probs.reshape(b, g, hkv, tq, -1), values)
    return out.reshape(b, hq, tq, values.shape[-1]), probs
