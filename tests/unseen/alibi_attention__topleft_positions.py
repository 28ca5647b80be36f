"""BUG: queries are placed at pos(i) = i (top-left) instead of i + Tk - Tq, so when Tq != Tk the causal mask cuts off the wrong keys and the non-causal distances are shifted.
STAGE: the query positions (causal mask and non-causal bias, only when Tq != Tk)
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise ValueError(f"num_heads must be an int, got {num_heads!r}")
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float64)
    slopes = torch.pow(base, torch.arange(1, 1 + closest_power_of_2))
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float64
        )
        n_rem = min(closest_power_of_2, num_heads - closest_power_of_2)
        slopes = torch.cat([slopes, torch.pow(extra_base, torch.arange(1, 1 + 2 * n_rem, 2))])
    return slopes


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dtype = queries.dtype
    cdt = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(device=dev, dtype=dtype).to(cdt)

    scores = torch.matmul(queries.to(cdt), keys.to(cdt).transpose(-1, -2)) / math.sqrt(d)
    i = torch.arange(Tq, device=dev)
    j = torch.arange(Tk, device=dev)
    dist = (i[:, None] - j[None, :]).abs().to(cdt)
    scores = scores - slopes.view(1, H, 1, 1) * dist

    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = torch.tril(allowed)
    allowed = allowed.expand(B, H, Tq, Tk)
    if mask is not None:
        allowed = allowed & mask.to(dev)
    scores = scores.masked_fill(~allowed, torch.finfo(cdt).min)
    weights = torch.softmax(scores, dim=-1) * allowed.to(cdt)
    output = torch.matmul(weights, values.to(cdt))
    return output.to(dtype), weights.to(dtype)
