"""BUG: none
STYLE: vLLM/HF-style cos_sin_cache table built for the position range and gathered with the position ids (offset by the minimum so positions need not start at 0), pairs handled by index gathers
"""
import torch


def _cos_sin_cache(pmin, pmax, d, base, dtype, device):
    inv_freq = torch.pow(torch.tensor(base, dtype=dtype, device=device),
                         -torch.arange(0, d, 2, device=device, dtype=dtype) / d)
    t = torch.arange(pmin, pmax + 1, device=device).to(dtype)
    freqs = torch.outer(t, inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1)        # (npos, d)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError("odd head size")
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    pos = positions.to(x.device)
    pmin, pmax = int(pos.min()), int(pos.max())
    cache = _cos_sin_cache(pmin, pmax, d, float(base), cdt, x.device)
    cos_sin = cache[(pos - pmin).long()]                          # positions.shape + (d,)
    cos, sin = cos_sin.chunk(2, dim=-1)
    xc = x.to(cdt)
    if interleaved:
        a, b = xc[..., 0::2], xc[..., 1::2]
    else:
        a, b = xc[..., : d // 2], xc[..., d // 2:]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    if interleaved:
        out = torch.stack((ra, rb), dim=-1).flatten(-2)
    else:
        out = torch.cat((ra, rb), dim=-1)
    return out.to(x.dtype)
