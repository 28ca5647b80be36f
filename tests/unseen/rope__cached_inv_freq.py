"""BUG: none
STYLE: a small rotary "module" object that caches inv_freq per (dim, base, dtype, device) across calls (no position table, so any position works); cos/sin are built per call from the given positions.
"""
import torch


class _RotaryFrequencies:
    def __init__(self):
        self._inv_freq = {}

    def inv_freq(self, dim, base, dtype, device):
        key = (dim, float(base), dtype, str(device))
        cached = self._inv_freq.get(key)
        if cached is None:
            exps = torch.arange(0, dim, 2, dtype=torch.float64) / dim
            cached = (float(base) ** (-exps)).to(device=device, dtype=dtype)
            if len(self._inv_freq) > 64:
                self._inv_freq.clear()
            self._inv_freq[key] = cached
        return cached

    def cos_sin(self, positions, dim, base, dtype, device):
        inv = self.inv_freq(dim, base, dtype, device)
        angles = positions.to(device=device, dtype=dtype).unsqueeze(-1) * inv
        return angles.cos(), angles.sin()


_ROTARY = _RotaryFrequencies()


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 == 1:
        raise ValueError("RoPE requires an even head dimension")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    cos, sin = _ROTARY.cos_sin(positions, dim, base, work, x.device)
    xw = x.to(work)
    if interleaved:
        x_even, x_odd = xw[..., 0::2], xw[..., 1::2]
        out_even = x_even * cos - x_odd * sin
        out_odd = x_even * sin + x_odd * cos
        out = torch.stack((out_even, out_odd), dim=-1).reshape(xw.shape)
    else:
        x_lo, x_hi = xw.chunk(2, dim=-1)
        out = torch.cat((x_lo * cos - x_hi * sin, x_lo * sin + x_hi * cos), dim=-1)
    return out.to(x.dtype)
