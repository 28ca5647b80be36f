"""BUG: the module-level inv_freq cache is keyed on (dim, dtype, device) but not on base, so after a call with one base every later call with another base silently reuses the first base's frequencies.
STAGE: the angles
"""
import torch


class _RotaryCache:
    def __init__(self):
        self.tables = {}

    def inv_freq(self, dim, base, dtype, device):
        key = (dim, dtype, str(device))
        if key not in self.tables:
            exps = torch.arange(0, dim, 2, dtype=torch.float64) / dim
            self.tables[key] = (float(base) ** (-exps)).to(device=device, dtype=dtype)
        return self.tables[key]


_CACHE = _RotaryCache()


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 == 1:
        raise ValueError("RoPE requires an even head dimension")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv = _CACHE.inv_freq(dim, base, work, x.device)
    angles = positions.to(device=x.device, dtype=work).unsqueeze(-1) * inv
    cos, sin = angles.cos(), angles.sin()
    xw = x.to(work)
    if interleaved:
        e, o = xw[..., 0::2], xw[..., 1::2]
        out = torch.stack((e * cos - o * sin, e * sin + o * cos), dim=-1).reshape(xw.shape)
    else:
        lo, hi = xw.chunk(2, dim=-1)
        out = torch.cat((lo * cos - hi * sin, lo * sin + hi * cos), dim=-1)
    return out.to(x.dtype)
