"""BUG: none
STYLE: rotation as complex multiplication (torch.polar, view_as_complex), as LLaMA's reference code does.
"""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    """Meta LLaMA style: complex multiplication."""
    d = x.size(-1)
    if d % 2:
        raise ValueError("odd feature size")
    cdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device)[: d // 2].to(cdt) / d))
    t = positions.to(device=x.device, dtype=cdt)
    angles = torch.einsum("...t,f->...tf", t, freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    xf = x.to(cdt)
    if interleaved:
        xc = torch.view_as_complex(xf.reshape(*xf.shape[:-1], d // 2, 2).contiguous())
    else:
        xc = torch.complex(xf[..., : d // 2], xf[..., d // 2 :])
    outc = xc * freqs_cis
    if interleaved:
        out = torch.view_as_real(outc).flatten(-2)
    else:
        out = torch.cat([outc.real, outc.imag], dim=-1)
    return out.to(x.dtype)
