"""BUG: none
STYLE: one code path for both conventions: unflatten the features into (pair, 2) or (2, pair), rotate (a, b) -> (a cos - b sin, a sin + b cos) with torch.pow frequencies, and flatten back.
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f"expected an even last dimension, got d={d}")
    npairs = d // 2
    dt = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    i = torch.arange(npairs, device=x.device, dtype=dt)
    freq = torch.pow(torch.tensor(float(base), device=x.device, dtype=dt), -2.0 * i / d)
    ang = positions.to(device=x.device, dtype=dt).unsqueeze(-1) * freq
    c, s = ang.cos(), ang.sin()

    xw = x.to(dt)
    if interleaved:
        pairs = xw.unflatten(-1, (npairs, 2))
        a, b = pairs[..., 0], pairs[..., 1]
    else:
        pairs = xw.unflatten(-1, (2, npairs))
        a, b = pairs[..., 0, :], pairs[..., 1, :]
    ra = a * c - b * s
    rb = a * s + b * c
    if interleaved:
        out = torch.stack((ra, rb), dim=-1)
    else:
        out = torch.stack((ra, rb), dim=-2)
    return out.flatten(-2).to(x.dtype)
