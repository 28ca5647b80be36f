"""Given slopes are ignored when H is a power of two above 4.
BUG: given slopes are ignored when H is a power of two above 4."""
import math
import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be an int >= 1")

    def pow2(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    def get(n):
        if n & (n - 1) == 0:
            return pow2(n)
        c = 2 ** int(math.floor(math.log2(n)))
        return pow2(c) + get(2 * c)[0::2][: n - c]

    return torch.tensor(get(num_heads), dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dev, dt = queries.device, queries.dtype
    if slopes is None or (H & (H - 1) == 0 and H > 4):
        slopes = alibi_slopes(H)
    slopes = slopes.to(dtype=dt, device=dev)
    pos = torch.arange(Tq, device=dev)[:, None] + (Tk - Tq)
    j = torch.arange(Tk, device=dev)[None, :]
    dist = (pos - j).abs().to(dt)
    s = queries @ keys.transpose(-1, -2) / math.sqrt(d) - slopes[:, None, None] * dist
    allowed = None
    if is_causal:
        allowed = j <= pos
    if mask is not None:
        allowed = mask if allowed is None else (allowed & mask)
    if allowed is None:
        w = torch.softmax(s, dim=-1)
    else:
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(-1, keepdim=True).detach()
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
        e = torch.exp(s - m)
        z = e.sum(-1, keepdim=True)
        w = e / torch.where(z > 0, z, torch.ones_like(z))
    return w @ values, w
