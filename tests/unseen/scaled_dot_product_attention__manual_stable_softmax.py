"""BUG: none
STYLE: interview-style hand-written softmax: max over the allowed keys subtracted, masked exp, guarded division.
"""
import math

import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.size(-1)
    scores = queries @ keys.transpose(-1, -2)
    scores = scores / math.sqrt(d)

    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), float("-inf"))

    # row max over allowed keys only; rows with nothing allowed get max 0
    row_max = scores.amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))

    e = torch.exp(scores - row_max)  # exp(-inf) == 0 for the masked keys
    denom = e.sum(dim=-1, keepdim=True)
    tiny = torch.finfo(denom.dtype).tiny
    weights = e / denom.clamp_min(tiny)  # 0 / tiny == 0 on empty rows

    out = weights @ values
    return out, weights
