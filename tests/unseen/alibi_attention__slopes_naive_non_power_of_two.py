"""BUG: 2^(-8(i+1)/n) for every n: wrong slopes for head counts that are no power of two
STYLE: BLOOM
"""
"""ALiBi attention, with the slopes formula from the paper's text: slope[i] = 2^(-8 (i+1) / n).

BUG: that formula is only the paper's rule for n a power of two; for other head counts the
paper's code interleaves the slopes of the next power of two. n = 3, 5, 6, 12... differ.
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be an int >= 1")
    i = torch.arange(num_heads, dtype=torch.float64)
    return 2.0 ** (-8.0 * (i + 1) / num_heads)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(queries.dtype).to(queries.device)
    pos = torch.arange(Tq, device=queries.device) + (Tk - Tq)
    rel = pos[:, None] - torch.arange(Tk, device=queries.device)[None, :]       # pos(i) - j
    dist = rel if is_causal else rel.abs()
    scores = queries @ keys.transpose(-1, -2) / math.sqrt(d) - slopes.view(H, 1, 1) * dist
    allowed = (rel >= 0) if is_causal else torch.ones_like(rel, dtype=torch.bool)
    if mask is not None:
        allowed = allowed & mask
    allowed = allowed.expand_as(scores)
    scores = scores.masked_fill(~allowed, -1e30 if scores.dtype == torch.float64 else -3e38)
    w = torch.softmax(scores, -1).masked_fill(~allowed, 0.0)
    return w @ values, w
