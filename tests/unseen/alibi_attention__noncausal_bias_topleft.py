"""BUG: |i - j| in the bidirectional mode: top-left, wrong where Tq != Tk
STYLE: MPT
"""
"""ALiBi attention (causal or bidirectional) with the paper's slopes.

The causal branch uses the mask and bias of a decoder with a cache (bottom-right). BUG: the
bidirectional branch builds |i - j| from the raw query index, i.e. positions aligned to the top
left; with Tq != Tk the symmetric bias is centred on the wrong key. (In the causal branch the
same mistake would only shift each row by a constant, which softmax ignores.)
"""
import math

import torch


def _pow2_slopes(n):
    start = 2 ** (-(2 ** -(math.log2(n) - 3)))
    return [start * start ** i for i in range(n)]


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("num_heads must be >= 1")
    if math.log2(num_heads).is_integer():
        s = _pow2_slopes(num_heads)
    else:
        c = 2 ** math.floor(math.log2(num_heads))
        s = _pow2_slopes(c) + _pow2_slopes(2 * c)[0::2][:num_heads - c]
    return torch.tensor(s, dtype=torch.float64)


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    sl = (alibi_slopes(H) if slopes is None else slopes).to(queries.device, queries.dtype)
    i = torch.arange(Tq, device=queries.device)[:, None]
    j = torch.arange(Tk, device=queries.device)[None, :]
    if is_causal:
        rel = (i + Tk - Tq) - j
        allowed = rel >= 0
        bias = -sl[:, None, None] * rel
    else:
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=queries.device)
        bias = -sl[:, None, None] * (i - j).abs()
    if mask is not None:
        allowed = allowed & mask
    s = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d) + bias
    s = torch.where(allowed, s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = torch.exp(s - mx)
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return torch.matmul(w, values), w
