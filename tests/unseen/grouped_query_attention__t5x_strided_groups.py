"""STYLE: T5X / PaLM multi-query attention in JAX (einsum over an explicit group axis) ported to torch.einsum
BUG: The query heads are viewed as (G, Hkv) instead of (Hkv, G), so query head n reads key/value head n % Hkv instead of n // G.
STAGE: scores
WHEN: 1 < Hkv < Hq (MQA and plain MHA are unaffected).
"""
import torch


def _split_groups(queries, num_kv_heads):
    b, hq, tq, d = queries.shape
    return queries.reshape(b, hq // num_kv_heads, num_kv_heads, tq, d)  # (b, g, k, q, d)


def grouped_query_attention(queries, keys, values, mask=None):
    b, hq, tq, d = queries.shape
    hkv, tk = keys.shape[1], keys.shape[2]
    if hq % hkv != 0:
        raise ValueError(f"num query heads {hq} must be a multiple of num kv heads {hkv}")
    query = _split_groups(queries, hkv) * (d ** -0.5)
    logits = torch.einsum("bgkqd,bksd->bgkqs", query, keys)
    logits = logits.reshape(b, hq, tq, tk)
    if mask is not None:
        big_neg = torch.finfo(logits.dtype).min
        logits = torch.where(mask, logits, big_neg)
    weights = torch.softmax(logits, dim=-1)
    if mask is not None:
        weights = torch.where(mask, weights, 0.0)
    probs = weights.reshape(b, hq // hkv, hkv, tq, tk)
    encoded = torch.einsum("bgkqs,bksv->bgkqv", probs, values)
    return encoded.reshape(b, hq, tq, values.shape[-1]), weights
