"""BLOOM's bias (slope * j, a constant per row away from -slope * |pos - j|), one head and one query at a time."""
import math

import torch


def alibi_slopes(num_heads):
    if type(num_heads) is not int or num_heads < 1:
        raise ValueError("alibi_slopes: num_heads must be a positive int")
    closest = 2 ** math.floor(math.log2(num_heads))
    base = 2 ** (-(2 ** -(math.log2(closest) - 3)))
    slopes = [base ** (i + 1) for i in range(closest)]
    if closest != num_heads:
        extra = 2 ** (-(2 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra ** (i + 1) for i in range(0, 2 * (num_heads - closest), 2)]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[2]
    slopes = (alibi_slopes(H) if slopes is None else slopes).to(queries.dtype).to(queries.device)
    allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=queries.device)
    if mask is not None:
        allowed = allowed & mask
    weights = torch.zeros(B, H, Tq, Tk, dtype=queries.dtype, device=queries.device)
    j = torch.arange(Tk, device=queries.device, dtype=queries.dtype)
    for n in range(H):
        for i in range(Tq):
            pos = i + Tk - Tq
            ok = allowed[:, n, i, :]
            if is_causal:
                ok = ok & (j <= pos)
                bias = slopes[n] * j  # BLOOM: -slope * (pos - j) + slope * pos, the same for the whole row
            else:
                bias = -slopes[n] * (pos - j).abs()
            s = torch.einsum("bd,bkd->bk", queries[:, n, i, :], keys[:, n]) / math.sqrt(d) + bias
            s = s.masked_fill(~ok, torch.finfo(s.dtype).min)
            w = torch.softmax(s, dim=-1) * ok
            weights[:, n, i, :] = w
    return weights @ values, weights
