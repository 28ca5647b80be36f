"""STYLE: Triton rotary kernel (flash-attn / xformers) ported to torch: explicit x0/x1 halves, o0/o1 formulas, CONJUGATE-style sign
BUG: The rotation uses the kernel's conjugate form (o0 = x0 cos + x1 sin, o1 = -x0 sin + x1 cos), i.e. it turns every pair by -angle.
STAGE: rotation
WHEN: Any nonzero position (both pair conventions).
"""
import torch


def _rotary_tables(positions, rotary_dim, base, dtype, device):
    idx = torch.arange(0, rotary_dim, 2, device=device, dtype=dtype)
    inv_freq = base ** (-idx / rotary_dim)
    t = positions.to(dtype)
    freqs = t[..., None] * inv_freq
    return torch.cos(freqs), torch.sin(freqs)


def _rotary_kernel(x0, x1, cos, sin):
    o0 = x0 * cos + x1 * sin
    o1 = -x0 * sin + x1 * cos
    return o0, o1


def apply_rope(x, positions, base=10000.0, interleaved=False):
    headdim = x.shape[-1]
    if headdim % 2 != 0:
        raise ValueError("headdim must be even")
    rotary_dim_half = headdim // 2
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = _rotary_tables(positions, headdim, base, acc, x.device)
    xa = x.to(acc)
    if not interleaved:
        x0, x1 = xa[..., :rotary_dim_half], xa[..., rotary_dim_half:]
    else:
        x0, x1 = xa[..., 0::2], xa[..., 1::2]
    o0, o1 = _rotary_kernel(x0, x1, cos, sin)
    if not interleaved:
        out = torch.cat([o0, o1], dim=-1)
    else:
        out = torch.stack([o0, o1], dim=-1).reshape(xa.shape)
    return out.to(x.dtype)
