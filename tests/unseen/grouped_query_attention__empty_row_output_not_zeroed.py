"""STYLE: tutorial GQA with torch.where masking and folded group axis
BUG: the returned weights are zeroed on masked keys, but the output is computed from the softmax before that, so a row with no allowed key outputs the mean of the values instead of 0.
STAGE: output
WHEN: a (batch, head, query) row with no allowed key
"""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    B, Hkv, Tk, dv = *keys.shape[:3], values.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} not divisible by Hkv={Hkv}")
    group = Hq // Hkv

    qg = queries.reshape(B, Hkv, group * Tq, d)
    scores = (qg @ keys.mT) / (d ** 0.5)
    scores = scores.reshape(B, Hq, Tq, Tk)
    if mask is not None:
        neg = torch.full((), torch.finfo(scores.dtype).min, dtype=scores.dtype, device=scores.device)
        scores = torch.where(mask, scores, neg)
    probs = scores.softmax(dim=-1)

    out = probs.reshape(B, Hkv, group * Tq, Tk) @ values
    weights = probs if mask is None else torch.where(mask, probs, torch.zeros_like(probs))
    return out.reshape(B, Hq, Tq, dv), weights
