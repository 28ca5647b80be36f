"""BUG: none
STYLE: the group folded into the queries: reshape(B, Hkv, G*Tq, d)
"""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv, Tk, dv = keys.shape[1], keys.shape[2], values.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"num query heads ({Hq}) must be a multiple of num kv heads ({Hkv})")
    G = Hq // Hkv
    # heads n = j*G + g share kv head j: fold (g, t) into one query axis
    q = queries.reshape(B, Hkv, G * Tq, d)
    scores = torch.matmul(q, keys.transpose(-1, -2)) / math.sqrt(d)   # (B, Hkv, G*Tq, Tk)
    if mask is not None:
        allowed = torch.broadcast_to(mask, (B, Hq, Tq, Tk)).reshape(B, Hkv, G * Tq, Tk)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0)
    else:
        probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, values)                                  # (B, Hkv, G*Tq, dv)
    return out.reshape(B, Hq, Tq, dv), probs.reshape(B, Hq, Tq, Tk)
