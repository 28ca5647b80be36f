"""STYLE: einsum over an explicit group axis (xformers / Mistral inference style)
BUG: the query heads are split as (G, Hkv) instead of (Hkv, G), so query head n reads key/value head n % Hkv instead of n // G (the torch.repeat convention, not repeat_interleave).
STAGE: scores
WHEN: 1 < Hkv < Hq (GQA proper); MQA (Hkv = 1) and MHA (Hkv = Hq) are right
"""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    _, Hkv, Tk, _ = keys.shape
    if Hq % Hkv != 0:
        raise ValueError(f"number of query heads ({Hq}) must be divisible by kv heads ({Hkv})")
    G = Hq // Hkv

    q = queries.view(B, G, Hkv, Tq, d)
    scores = torch.einsum("bghqd,bhkd->bghqk", q, keys) / math.sqrt(d)
    scores = scores.reshape(B, Hq, Tq, Tk)

    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask

    out = torch.einsum("bghqk,bhkd->bghqd", weights.view(B, G, Hkv, Tq, Tk), values)
    return out.reshape(B, Hq, Tq, values.shape[-1]), weights
