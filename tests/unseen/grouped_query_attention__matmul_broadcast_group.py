"""BUG: adds a group axis and lets torch.matmul broadcast K/V of shape (B, Hkv, 1, Tk, d) over it, which copies K and V per query head when B*Hkv > 1; values are right.
STAGE: the memory bound
"""
import math

import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv = keys.shape[1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv

    q = queries.reshape(B, Hkv, G, Tq, d)
    k = keys.unsqueeze(2)  # (B, Hkv, 1, Tk, d): broadcast over the group, no repeat
    v = values.unsqueeze(2)  # (B, Hkv, 1, Tk, dv)

    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)  # (B, Hkv, G, Tq, Tk)
    scores = scores.flatten(1, 2)  # (B, Hq, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)

    out = weights.view(B, Hkv, G, Tq, -1) @ v  # (B, Hkv, G, Tq, dv)
    return out.flatten(1, 2), weights
