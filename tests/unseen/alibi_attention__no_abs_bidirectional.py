"""BUG: the bias is -slope * (pos(i) - j) in both modes, without abs(), so with is_causal=False keys after the query get a positive (rewarding) bias instead of a symmetric penalty.
STAGE: the bias (non-causal mode only)
"""
import math

import torch


def get_slopes(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def alibi_slopes(num_heads):
    if type(num_heads) is bool or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be a positive int")
    return torch.tensor(get_slopes(num_heads), dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[2]
    out_dtype = queries.dtype
    work = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(dev, out_dtype).to(work)

    scores = torch.einsum("bhid,bhjd->bhij", queries.to(work), keys.to(work)) / math.sqrt(d)
    pos = torch.arange(Tq, device=dev) + (Tk - Tq)
    j = torch.arange(Tk, device=dev)
    rel = (pos[:, None] - j[None, :]).to(work)  # pos(i) - j
    scores = scores - slopes[None, :, None, None] * rel

    allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = allowed & (rel >= 0)
    if mask is not None:
        allowed = allowed & mask.to(dev)
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    m = scores.amax(dim=-1, keepdim=True).detach()
    m = torch.nan_to_num(m, neginf=0.0)
    e = torch.exp(scores - m)
    tot = e.sum(-1, keepdim=True)
    weights = e / torch.where(tot > 0, tot, torch.ones_like(tot))
    output = torch.einsum("bhij,bhje->bhie", weights, values.to(work))
    return output.to(out_dtype), weights.to(out_dtype)
