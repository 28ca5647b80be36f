"""BUG: alibi_slopes applies the power-of-two formula 2 ** (-8 (i + 1) / n) to every head count, so for 3, 5, 6, 12 ... heads the slopes are not the paper's interleaved ones.
STAGE: the slopes (only for head counts that are not a power of two)
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise ValueError("num_heads must be an int")
    if num_heads < 1:
        raise ValueError("num_heads must be >= 1")
    i = torch.arange(num_heads, dtype=torch.float64)
    return torch.pow(2.0, -8.0 * (i + 1) / num_heads)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dtype = queries.dtype
    cdt = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(device=dev, dtype=dtype).to(cdt)

    scores = torch.matmul(queries.to(cdt), keys.to(cdt).transpose(-2, -1)) / math.sqrt(d)
    pos = torch.arange(Tq, device=dev) + (Tk - Tq)
    j = torch.arange(Tk, device=dev)
    dist = (pos[:, None] - j[None, :]).abs().to(cdt)
    scores = scores - slopes.view(1, H, 1, 1) * dist

    allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = allowed & (j[None, :] <= pos[:, None])
    if mask is not None:
        allowed = allowed & mask.to(dev)
    scores = scores.masked_fill(~allowed, torch.finfo(cdt).min)
    weights = torch.softmax(scores, dim=-1) * allowed
    output = weights @ values.to(cdt)
    return output.to(dtype), weights.to(dtype)
