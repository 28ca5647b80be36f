"""BUG: disallowed keys are filled with -1e9 and the softmax output is used as is, so a row with no allowed key (fully masked, or pos(i) < 0 when Tq > Tk) gets uniform weights 1/Tk instead of zeros.
STAGE: the softmax on rows with no allowed key
"""
import math

import torch


def _pow2_slopes(n):
    return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]


def alibi_slopes(num_heads):
    if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads <= 0:
        raise ValueError("num_heads must be a positive int")
    c = 2 ** int(math.floor(math.log2(num_heads)))
    vals = _pow2_slopes(c)
    if c != num_heads:
        vals += _pow2_slopes(2 * c)[0::2][: num_heads - c]
    return torch.tensor(vals, dtype=torch.float64)


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
    rel = (pos[:, None] - j[None, :]).to(work)
    scores = scores - slopes[None, :, None, None] * rel.abs()

    allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = allowed & (rel >= 0)
    if mask is not None:
        allowed = allowed & mask.to(dev)
    scores = scores.masked_fill(~allowed, -1e9)
    weights = torch.softmax(scores, dim=-1)
    output = torch.einsum("bhij,bhje->bhie", weights, values.to(work))
    return output.to(out_dtype), weights.to(out_dtype)
