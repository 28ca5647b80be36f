"""BUG: a module-level inv_freq cache keyed without the base
STYLE: cached table
"""
"""Rotary embedding with a module-level cache of inv_freq, so repeated calls (every layer,
every decoding step) do not rebuild it.

BUG: the cache key is (d, dtype, device) and leaves out `base`: after one call with some base,
a call with the same head size and another base reuses the stale frequencies.
"""
import torch

_INV_FREQ_CACHE = {}


def _inv_freq(d, base, dtype, device):
    key = (d, dtype, str(device))
    if key not in _INV_FREQ_CACHE:
        exponent = torch.arange(0, d, 2, dtype=dtype, device=device) / d
        _INV_FREQ_CACHE[key] = torch.pow(torch.tensor(base, dtype=dtype, device=device), -exponent)
    return _INV_FREQ_CACHE[key]


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"d must be even, got {d}")
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    ang = positions.to(dt)[..., None] * _inv_freq(d, base, dt, x.device)
    c, s = torch.cos(ang), torch.sin(ang)
    xf = x.to(dt)
    if interleaved:
        a, b = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    else:
        a, b = xf.chunk(2, dim=-1)
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)
    return out.to(x.dtype)
