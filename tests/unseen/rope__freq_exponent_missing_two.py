"""BUG: the frequencies use base^(-i/d) for i = 0..d/2-1 instead of base^(-2i/d) (torch.arange(d // 2) / d, dropping the factor 2), so every pair but the first turns too fast.
STAGE: the angles
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError("head dimension must be even for rotary embeddings")
    half = d // 2
    work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    inv_freq = 1.0 / (base ** (torch.arange(half, device=x.device, dtype=torch.float64) / d))
    theta = positions.to(device=x.device, dtype=work)[..., None] * inv_freq.to(work)
    cos, sin = theta.cos(), theta.sin()
    xw = x.to(work)
    if interleaved:
        a, b = xw[..., 0::2], xw[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = xw[..., :half], xw[..., half:]
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return out.to(x.dtype)
