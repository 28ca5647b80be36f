"""STYLE: GPT-NeoX / Hugging Face rotate_half with cos/sin caches built by cat(freqs, freqs)
BUG: rotate_half returns cat(x2, -x1) instead of cat(-x2, x1), so every pair is rotated by -angle.
STAGE: rotation
WHEN: always (any nonzero position)
"""
import torch


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x2, -x1), dim=-1)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((x2, -x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"rotary dim must be even, got {dim}")
    dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=x.device, dtype=dtype) / dim))
    freqs = torch.einsum("...t,f->...tf", positions.to(dtype), inv_freq)
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)
        x_rot = rotate_every_two(x.to(dtype))
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        x_rot = rotate_half(x.to(dtype))
    out = x.to(dtype) * emb.cos() + x_rot * emb.sin()
    return out.to(x.dtype)
