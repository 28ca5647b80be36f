"""BUG: the interleaved branch reuses the rotate-half cos/sin layout cat(freqs, freqs) instead of repeat_interleave(freqs, 2), so pair (2i, 2i+1) gets the angles of features 2i, 2i+1 of that table.
STAGE: the angles
"""
import torch


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_interleaved(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"RoPE needs an even feature size, got {dim}")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=x.device) / dim))
    freqs = positions.to(device=x.device, dtype=work)[..., None] * inv_freq.to(work)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    rotate = _rotate_interleaved if interleaved else _rotate_half
    xw = x.to(work)
    return (xw * cos + rotate(xw) * sin).to(x.dtype)
