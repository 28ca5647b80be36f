"""BUG: to "save memory" the rotated halves are written back into x's own storage (out = x when no cast is needed), so the caller's x is modified in place (and autograd on a leaf x fails).
STAGE: the inputs
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError("odd feature size: RoPE rotates pairs")
    half = d // 2
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d))
    theta = positions.to(device=x.device, dtype=work)[..., None] * inv_freq.to(work)
    cos, sin = theta.cos(), theta.sin()
    out = x.to(work)
    if interleaved:
        a, b = out[..., 0::2], out[..., 1::2]
    else:
        a, b = out[..., :half], out[..., half:]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    if interleaved:
        out[..., 0::2] = ra
        out[..., 1::2] = rb
    else:
        out[..., :half] = ra
        out[..., half:] = rb
    return out.to(x.dtype)
