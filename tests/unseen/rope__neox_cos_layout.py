"""STYLE: GPT-NeoX / GPT-J rotary code mixed (sin/cos tables built once, then applied with rotate_half or rotate_every_two)
BUG: For rotate-half pairs (interleaved=False) the cos/sin tables are laid out GPT-J style with repeat_interleave, so feature f turns by angle theta_{(f mod d) // 2} instead of theta_{f mod d/2}.
STAGE: cos/sin
WHEN: interleaved=False with d >= 4 and a nonzero position (interleaved=True is right).
"""
import torch


def fixed_pos_embedding(positions, dim, base, dtype):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=positions.device, dtype=dtype) / dim))
    sinusoid_inp = positions.to(dtype)[..., None] * inv_freq
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)


def duplicate_interleave(m):
    """A simple version of torch.repeat_interleave for duplicating a matrix while interleaving the copy."""
    return torch.repeat_interleave(m, 2, dim=-1)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("rotary embedding needs an even feature size")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    sin, cos = fixed_pos_embedding(positions, d, base, work)
    sin, cos = duplicate_interleave(sin), duplicate_interleave(cos)
    xw = x.to(work)
    rotated = rotate_every_two(xw) if interleaved else rotate_half(xw)
    return (xw * cos + rotated * sin).to(x.dtype)
