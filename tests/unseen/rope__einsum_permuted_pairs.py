"""BUG: none
STYLE: einsum-built angle table and a single rotate-half kernel; the interleaved convention is handled by gathering features into (evens, odds) order with an index permutation and scattering back afterwards.
"""
import math

import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError("odd feature size %d: RoPE rotates pairs of features" % d)
    half = d // 2
    angle_dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    idx = torch.arange(half, device=x.device, dtype=torch.float64)
    inv_freq = torch.exp(idx * (-2.0 * math.log(base) / d)).to(angle_dtype)
    pos = positions.to(device=x.device, dtype=angle_dtype)
    theta = torch.einsum("...t,f->...tf", pos, inv_freq)
    cos, sin = torch.cos(theta), torch.sin(theta)

    if interleaved:
        perm = torch.cat([torch.arange(0, d, 2, device=x.device), torch.arange(1, d, 2, device=x.device)])
        xs = x[..., perm]
    else:
        xs = x
    xs = xs.to(angle_dtype)
    a, b = xs[..., :half], xs[..., half:]
    rotated = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    if interleaved:
        inv_perm = torch.argsort(perm)
        rotated = rotated[..., inv_perm]
    return rotated.to(x.dtype)
