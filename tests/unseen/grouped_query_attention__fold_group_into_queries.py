"""BUG: none
STYLE: folds the G query heads of each group into the query axis (B, Hkv, G*Tq, d), one matmul against the un-repeated K/V, masked_fill(-inf) on the (B, Hq, Tq, Tk) view.
"""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv, Tk = keys.shape[1], keys.shape[2]
    dv = values.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"num query heads ({Hq}) must be a multiple of num kv heads ({Hkv})")
    G = Hq // Hkv

    # query head n = kv_head * G + g  ->  row g*Tq + t of kv head kv_head
    q = queries.reshape(B, Hkv, G * Tq, d)
    scores = torch.matmul(q, keys.transpose(-1, -2)) / math.sqrt(d)  # (B, Hkv, G*Tq, Tk)
    scores = scores.view(B, Hq, Tq, Tk)

    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)

    out = torch.matmul(weights.reshape(B, Hkv, G * Tq, Tk), values)  # (B, Hkv, G*Tq, dv)
    return out.reshape(B, Hq, Tq, dv), weights
