"""STYLE: interview answer, cos/sin tables with rotate_half
BUG: the frequencies use base ** (-i / d) instead of base ** (-2i / d).
STAGE: angles
WHEN: always (any nonzero position, pairs i >= 1)
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError("d must be even")
    half = head_dim // 2
    dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32

    # one frequency per pair
    freqs = base ** (-torch.arange(half, device=x.device, dtype=dtype) / head_dim)
    angles = positions.to(dtype)[..., None] * freqs
    cos, sin = angles.cos(), angles.sin()

    orig_dtype = x.dtype
    x = x.to(dtype)
    if interleaved:
        a, b = x[..., ::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., ::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
    else:
        a, b = x[..., :half], x[..., half:]
        out = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return out.to(orig_dtype)
