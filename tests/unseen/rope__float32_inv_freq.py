"""BUG: inv_freq and the angle product are always computed in float32 (Hugging Face's inv_freq.float() habit) and only the result is cast back, so float64 inputs get float32-accurate angles.
STAGE: the angles
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError("apply_rope: the last dimension of x must be even")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).float() / dim))
    freqs = positions.to(x.device).float()[..., None] * inv_freq
    cos = freqs.cos().to(x.dtype if x.dtype == torch.float64 else torch.float32)
    sin = freqs.sin().to(cos.dtype)
    xw = x.to(cos.dtype)
    if interleaved:
        a, b = xw[..., 0::2], xw[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = xw.chunk(2, dim=-1)
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return out.to(x.dtype)
