"""STYLE: Hugging Face LlamaRotaryEmbedding (inv_freq buffer, .float() cos/sin, rotate_half)
BUG: the inverse frequencies and the angles are always computed in float32 (inv_freq.float()), even for float64 inputs.
STAGE: angles
WHEN: float64 only (grows with position; large at positions >= 1e4)
"""
import torch


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _rotate_pairs(x):
    # (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"RoPE needs an even head dim, got {dim}")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).float() / dim))

    # (..., T, 1) x (dim/2,) -> (..., T, dim/2)
    freqs = positions[..., None].float() * inv_freq.float()
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
        rot = _rotate_pairs
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        rot = rotate_half
    cos = emb.cos()
    sin = emb.sin()

    compute_dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    xc = x.to(compute_dtype)
    cos = cos.to(compute_dtype)
    sin = sin.to(compute_dtype)
    out = (xc * cos) + (rot(xc) * sin)
    return out.to(x.dtype)
