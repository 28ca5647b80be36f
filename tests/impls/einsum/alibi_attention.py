"""The distance matrix built once, the slopes from the paper's recursion, einsum for both products."""
import math

import torch


def _power_of_two(n):
    start = 2 ** (-8 / n)
    return [start ** (i + 1) for i in range(n)]


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads <= 0:
        raise ValueError(f"num_heads must be an int >= 1, got {num_heads!r}")
    if math.log2(num_heads).is_integer():
        return torch.tensor(_power_of_two(num_heads), dtype=torch.float64)
    c = 2 ** int(math.log2(num_heads))
    return torch.tensor(_power_of_two(c) + _power_of_two(2 * c)[::2][: num_heads - c], dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    H, Tq, Tk = queries.shape[1], queries.shape[2], keys.shape[2]
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(queries)
    rel = torch.arange(Tk, device=queries.device)[None, :] - torch.arange(Tk - Tq, Tk, device=queries.device)[:, None]
    bias = -torch.einsum("h,ij->hij", slopes, rel.abs().to(queries.dtype))
    scores = torch.einsum("bhid,bhjd->bhij", queries, keys) * queries.shape[-1] ** -0.5 + bias
    ok = torch.ones_like(scores, dtype=torch.bool)
    if is_causal:
        ok = ok & (rel <= 0)
    if mask is not None:
        ok = ok & mask
    weights = torch.softmax(scores.masked_fill(~ok, torch.finfo(scores.dtype).min), dim=-1) * ok
    return torch.einsum("bhij,bhjd->bhid", weights, values), weights
