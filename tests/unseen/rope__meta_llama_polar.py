"""BUG: none
STYLE: Meta LLaMA's torch.polar and view_as_complex
"""
"""Rotary embedding as complex multiplication, after Meta's llama (precompute_freqs_cis +
apply_rotary_emb with torch.polar). Interleaved pairs are (real, imag) of adjacent features;
rotate-half pairs are (x[i], x[i + d/2]). Float32 or float64 math, never lower.
"""
import torch


def precompute_freqs_cis(dim, positions, theta, dtype):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device)[: (dim // 2)].to(dtype) / dim))
    angles = positions.to(dtype)[..., None] * freqs
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("apply_rope needs an even head dimension")
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs_cis = precompute_freqs_cis(d, positions.to(x.device), base, work)
    xw = x.to(work)
    if interleaved:
        xc = torch.view_as_complex(xw.reshape(*x.shape[:-1], d // 2, 2).contiguous())
        out = torch.view_as_real(xc * freqs_cis).flatten(-2)
    else:
        xc = torch.complex(xw[..., : d // 2], xw[..., d // 2:])
        rot = xc * freqs_cis
        out = torch.cat((rot.real, rot.imag), dim=-1)
    return out.type_as(x)
