"""STYLE: RoFormer / GPT-J style even-odd slicing with sinusoidal sin/cos tables
BUG: in the interleaved layout the rotated even and odd features are concatenated ([evens, odds]) instead of being re-interleaved into (2i, 2i+1) slots.
STAGE: output
WHEN: interleaved=True only
"""
import math

import torch


def _sin_cos(positions, d, base, dtype, device):
    # theta_i = base^(-2i/d), written as exp(-2i * ln(base) / d)
    idx = torch.arange(0, d, 2, dtype=dtype, device=device)
    inv = torch.exp(idx * (-math.log(base) / d))
    ang = positions.to(dtype).unsqueeze(-1) * inv
    return torch.sin(ang), torch.cos(ang)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.size(-1)
    if d % 2 == 1:
        raise ValueError("apply_rope: odd feature size")
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    sin, cos = _sin_cos(positions, d, base, dt, x.device)
    xf = x.to(dt)
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
    else:
        x1, x2 = xf.chunk(2, dim=-1)
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)
