"""STYLE: Flax/JAX rotary code ported to torch (timescale = base ** fraction, complex multiplication via torch.polar)
BUG: none
STAGE: none
WHEN: never (correct on every contract input)
"""
import torch


def _as_pairs(x, interleaved):
    half = x.shape[-1] // 2
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    return x[..., :half], x[..., half:]


def _from_pairs(re, im, interleaved):
    if interleaved:
        return torch.stack([re, im], dim=-1).flatten(-2)
    return torch.cat([re, im], dim=-1)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rope: feature dim {d} is odd")
    dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    fraction = 2 * torch.arange(0, d // 2, device=x.device, dtype=dtype) / d
    timescale = base ** fraction
    sinusoid_inp = positions.to(dtype)[..., None] / timescale
    rotor = torch.polar(torch.ones_like(sinusoid_inp), sinusoid_inp)
    a, b = _as_pairs(x.to(dtype), interleaved)
    z = torch.complex(a, b) * rotor
    return _from_pairs(z.real, z.imag, interleaved).to(x.dtype)
