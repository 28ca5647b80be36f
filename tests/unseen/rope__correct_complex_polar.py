"""STYLE: Meta LLaMA complex-number RoPE (torch.polar, view_as_complex) extended to both pair layouts
BUG: none
STAGE: none
WHEN: never
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rope: d = {d} is odd")
    real = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    half = d // 2

    exponents = torch.arange(0, d, 2, device=x.device, dtype=real) / d
    theta = torch.pow(torch.tensor(base, dtype=real, device=x.device), -exponents)  # (d/2,)
    angles = positions.to(real).unsqueeze(-1) * theta  # (..., T, d/2)
    rot = torch.polar(torch.ones_like(angles), angles)

    xr = x.to(real)
    if interleaved:
        z = torch.view_as_complex(xr.reshape(*xr.shape[:-1], half, 2).contiguous())
        out = torch.view_as_real(z * rot).reshape(xr.shape)
    else:
        z = torch.complex(xr[..., :half], xr[..., half:])
        zr = z * rot
        out = torch.cat((zr.real, zr.imag), dim=-1)
    return out.to(x.dtype)
