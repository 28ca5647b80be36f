"""STYLE: functional einops-style code (explicit group axis, einsum strings, tiny helpers)
BUG: none
STAGE: none
WHEN: never (correct on every contract input)
"""
import math

import torch


def _group(q, hkv):
    b, hq, t, d = q.shape
    return q.view(b, hkv, hq // hkv, t, d)


def _masked_softmax(logits, mask):
    if mask is None:
        return logits.softmax(dim=-1)
    neg = torch.finfo(logits.dtype).min
    return logits.masked_fill(mask.logical_not(), neg).softmax(dim=-1).masked_fill(mask.logical_not(), 0.0)


def grouped_query_attention(queries, keys, values, mask=None):
    b, hq, tq, d = queries.shape
    hkv = keys.shape[1]
    if hq % hkv:
        raise ValueError(f"grouped_query_attention: {hq} query heads cannot be split into {hkv} groups")
    logits = torch.einsum("bhgqd,bhkd->bhgqk", _group(queries, hkv), keys) / math.sqrt(d)
    weights = _masked_softmax(logits.flatten(1, 2), mask)  # (b, hq, tq, tk)
    out = torch.einsum("bhgqk,bhkv->bhgqv", weights.unflatten(1, (hkv, hq // hkv)), values)
    return out.flatten(1, 2), weights
