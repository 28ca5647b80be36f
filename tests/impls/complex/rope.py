"""RoPE as complex multiplication (Meta's LLaMA: view_as_complex and polar)."""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("apply_rope needs an even feature size")
    real = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=real)[: d // 2] / d))
    angles = torch.outer(torch.ones(1, device=x.device, dtype=real), freqs)[0] * positions.to(real)[..., None]
    cis = torch.polar(torch.ones_like(angles), angles)
    xr = x.to(real)
    if interleaved:
        z = torch.view_as_complex(xr.reshape(*xr.shape[:-1], d // 2, 2).contiguous())
        return torch.view_as_real(z * cis).flatten(-2).to(x.dtype)
    z = torch.complex(xr[..., : d // 2], xr[..., d // 2:])
    w = z * cis
    return torch.cat((w.real, w.imag), dim=-1).to(x.dtype)
