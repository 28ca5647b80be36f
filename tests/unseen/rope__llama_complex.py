"""BUG: none
STYLE: Meta LLaMA precompute_freqs_cis / torch.polar / view_as_complex, with the frequencies in x's dtype (not .float()), and the rotate-half pairing expressed as complex(x[:d/2], x[d/2:])
"""
import torch


def precompute_freqs_cis(dim, positions, theta, dtype):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device)[: (dim // 2)].to(dtype) / dim))
    angles = positions.to(dtype).unsqueeze(-1) * freqs            # (..., T, d/2)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"RoPE needs an even feature size, got d={d}")
    cdtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    freqs_cis = precompute_freqs_cis(d, positions, base, cdtype)
    xf = x.to(cdtype)
    if interleaved:
        x_ = torch.view_as_complex(xf.reshape(*xf.shape[:-1], -1, 2).contiguous())
        out = torch.view_as_real(x_ * freqs_cis).flatten(-2)
    else:
        x_ = torch.complex(xf[..., : d // 2], xf[..., d // 2:])
        rot = x_ * freqs_cis
        out = torch.cat([rot.real, rot.imag], dim=-1)
    out = out.expand(*torch.broadcast_shapes(out.shape, x.shape))
    return out.to(x.dtype)
