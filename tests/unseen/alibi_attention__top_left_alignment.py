"""BUG: positions are aligned top-left (pos(i) = i) for both the distance and the causal rule instead of i + Tk - Tq; differs whenever Tq != Tk (e.g. decoding Tq=3, Tk=9).
STAGE: the mask (and the bias)
STYLE: course solution that reuses a training-time (square) causal mask, loop over heads in float64
"""
import math

import torch


def _get_slopes_list(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + _get_slopes_list(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise ValueError("num_heads must be an int")
    if num_heads < 1:
        raise ValueError("num_heads must be >= 1")
    return torch.tensor(_get_slopes_list(num_heads), dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[2]
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(device=dev, dtype=queries.dtype)
    pos = torch.arange(Tq, device=dev).unsqueeze(1)
    kj = torch.arange(Tk, device=dev).unsqueeze(0)
    dist = (pos - kj).abs().to(torch.float64)
    allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = allowed & (kj <= pos)
    if mask is not None:
        allowed = allowed & mask
    outs, ws = [], []
    for n in range(H):
        q = queries[:, n].to(torch.float64)
        k = keys[:, n].to(torch.float64)
        v = values[:, n].to(torch.float64)
        s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)
        s = s - slopes[n].to(torch.float64) * dist
        a = allowed[:, n]
        s = torch.where(a, s, torch.tensor(float("-inf"), dtype=torch.float64, device=dev))
        mx = s.max(dim=-1, keepdim=True).values
        mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
        e = torch.exp(s - mx)
        tot = e.sum(-1, keepdim=True)
        w = e / torch.where(tot > 0, tot, torch.ones_like(tot))
        ws.append(w)
        outs.append(torch.bmm(w, v))
    weights = torch.stack(ws, dim=1).to(queries.dtype)
    output = torch.stack(outs, dim=1).to(queries.dtype)
    return output, weights
