"""STYLE: Meta's original LLaMA reference code (precompute_freqs_cis, torch.polar, view_as_complex)
BUG: features are always paired as adjacent (2i, 2i+1) complex numbers, so interleaved=False (rotate-half pairing) is rotated with the wrong pairs.
STAGE: rotation
WHEN: interleaved=False (the default); interleaved=True is right
"""
import torch


def precompute_freqs_cis(dim, positions, theta=10000.0, dtype=torch.float32):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device, dtype=dtype)[: (dim // 2)] / dim))
    t = positions.to(dtype)
    freqs = t[..., None] * freqs  # (..., T, dim/2)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64 / complex128
    return freqs_cis


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("head dim must be even for rotary embeddings")
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs_cis = precompute_freqs_cis(d, positions, theta=base, dtype=work)
    x_ = torch.view_as_complex(x.to(work).reshape(*x.shape[:-1], -1, 2).contiguous())
    x_out = torch.view_as_real(x_ * freqs_cis).flatten(-2)
    return x_out.type_as(x)
