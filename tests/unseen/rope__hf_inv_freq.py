"""STYLE: Hugging Face LlamaRotaryEmbedding (inv_freq from an int64 arange, `.float()` angles, rotate_half, cos/sin cast to x.dtype)
BUG: inv_freq and the angles are computed in float32 even for float64 inputs (HF's `inv_freq.float()` / `position_ids.float()`).
STAGE: angles
WHEN: float64 inputs at any nonzero position (error ~5e-8 at positions < 10, ~1e-4 at 1e4, ~1e-3 at 1e5); float32 is within tolerance.
"""
import torch


def _compute_inv_freq(base, dim, device):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"rotary dim must be even, got {dim}")
    inv_freq = _compute_inv_freq(base, dim, x.device)
    freqs = positions.float()[..., None] * inv_freq  # (..., T, dim/2)
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
        rot = rotate_every_two
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        rot = rotate_half
    compute_dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    cos = emb.cos().to(compute_dtype)
    sin = emb.sin().to(compute_dtype)
    xc = x.to(compute_dtype)
    return (xc * cos + rot(xc) * sin).to(x.dtype)
