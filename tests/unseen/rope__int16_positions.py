"""Positions that are not int64 are cast to int16 (wrong past 32767).
BUG: positions that are not int64 are cast to int16 (wrong past 32767)."""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError("d must be even")
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    half = d // 2
    exps = torch.arange(half, device=x.device, dtype=cdt) * 2 / d
    inv = torch.pow(torch.tensor(float(base), dtype=cdt, device=x.device), -exps)
    positions = positions if positions.dtype == torch.int64 else positions.to(torch.int16)
    ang = positions.to(device=x.device, dtype=cdt)[..., None] * inv
    cos, sin = ang.cos(), ang.sin()
    xc = x.to(cdt)
    if interleaved:
        a, b = xc[..., 0::2], xc[..., 1::2]
    else:
        a, b = xc[..., :half], xc[..., half:]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    if interleaved:
        out = torch.stack([ra, rb], dim=-1).flatten(-2)
    else:
        out = torch.cat([ra, rb], dim=-1)
    return out.to(x.dtype)
