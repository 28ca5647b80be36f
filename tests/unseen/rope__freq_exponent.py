"""BUG: frequencies base ** (-i / d) for i = 0 .. d/2-1 (the factor 2 of the exponent 2i/d is missing), so every pair but the first rotates too fast (the frequencies decay half as quickly). Differs on: any input with d >= 4 and a nonzero position.
STAGE: inv_freq
STYLE: RoFormer/GPT-J-style sinusoid table written from memory, torch.where-free elementwise
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("d must be even")
    dt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    i = torch.arange(d // 2, device=x.device, dtype=dt)
    inv_freq = base ** (-i / d)
    ang = positions.to(x.device, dt).unsqueeze(-1) * inv_freq
    cos, sin = ang.cos(), ang.sin()
    xx = x.to(dt)
    if interleaved:
        a, b = xx[..., 0::2], xx[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2).to(x.dtype)
    a, b = xx[..., : d // 2], xx[..., d // 2:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1).to(x.dtype)
