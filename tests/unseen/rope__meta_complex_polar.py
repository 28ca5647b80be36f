"""BUG: none
STYLE: Meta LLaMA style complex rotation: freqs_cis = torch.polar(1, angles); interleaved pairs via view_as_complex, rotate-half pairs built as torch.complex(x[:d/2], x[d/2:]); half precision upcast to float32.
"""
import torch


def _precompute_freqs_cis(dim, positions, theta, real_dtype, device):
    exponents = torch.arange(0, dim, 2, device=device, dtype=real_dtype)[: dim // 2] / dim
    freqs = 1.0 / (theta ** exponents)
    angles = positions.to(device=device, dtype=real_dtype)[..., None] * freqs
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError("apply_rope: the last dimension of x must be even")
    real_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    half = dim // 2
    freqs_cis = _precompute_freqs_cis(dim, positions, float(base), real_dtype, x.device)
    xr = x.to(real_dtype)
    if interleaved:
        x_c = torch.view_as_complex(xr.reshape(*xr.shape[:-1], half, 2).contiguous())
    else:
        x_c = torch.complex(xr[..., :half], xr[..., half:])
    rotated = x_c * freqs_cis
    if interleaved:
        out = torch.view_as_real(rotated).flatten(-2)
    else:
        out = torch.cat((rotated.real, rotated.imag), dim=-1)
    return out.to(x.dtype)
