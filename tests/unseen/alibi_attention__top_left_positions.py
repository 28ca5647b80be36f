"""BUG: query i sits at pos(i) = i (top-left alignment) instead of i + Tk - Tq.
STAGE: the catalogue's top_left
"""
import math
import torch


def _get_slopes(n):
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + _get_slopes(2 * c)[0::2][: n - c]


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be an int >= 1, got {num_heads!r}")
    return torch.tensor(_get_slopes(num_heads), dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(dtype=queries.dtype, device=queries.device)

    scores = queries @ keys.transpose(-2, -1) / math.sqrt(d)
    pos = torch.arange(Tq, device=queries.device)
    j = torch.arange(Tk, device=queries.device)
    dist = (pos[:, None] - j[None, :]).abs().to(queries.dtype)  # (Tq, Tk)
    scores = scores - slopes.view(H, 1, 1) * dist

    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device)
    if is_causal:
        allowed = j[None, :] <= pos[:, None]
    if mask is not None:
        allowed = allowed & mask.to(queries.device)
    allowed = allowed.expand(scores.shape)

    scores = scores.masked_fill(~allowed, float("-inf"))
    any_allowed = allowed.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~any_allowed, 0.0)
    weights = torch.softmax(scores, dim=-1)
    weights = weights.masked_fill(~allowed, 0.0)
    output = weights @ values
    return output, weights
