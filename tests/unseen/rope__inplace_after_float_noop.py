"""BUG: .float() returns x itself, so the in-place rotation writes into the caller's tensor
STYLE: in-place rotation
"""
"""Rotary embedding that upcasts, then rotates the two halves in place to save a buffer.

The author takes `x.float()` (or `x.double()`) to be a fresh working copy, as it is for
float16/bfloat16 inputs.

BUG: for float32 (and float64) inputs `.float()` / `.double()` return x itself, so the in-place
rotation writes into the caller's tensor (and fails under autograd on a leaf). Only half-precision
inputs are safe.
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd feature size")
    work = x.double() if x.dtype == torch.float64 else x.float()
    inv_freq = base ** (-torch.arange(0, d // 2, dtype=work.dtype, device=x.device) * 2.0 / d)
    ang = positions.to(work.dtype)[..., None] * inv_freq
    cos, sin = ang.cos(), ang.sin()
    if interleaved:
        a, b = work[..., 0::2], work[..., 1::2]
    else:
        a, b = work[..., : d // 2], work[..., d // 2:]
    new_a = a * cos - b * sin
    b.mul_(cos).add_(a * sin)
    a.copy_(new_a)
    return work.to(x.dtype)
