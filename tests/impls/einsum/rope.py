"""RoPE with 2x2 rotation matrices applied by einsum."""
import math

import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"d must be even, got {d}")
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    exps = torch.arange(0, d, 2, device=x.device, dtype=wide) / d
    theta = torch.exp(-math.log(base) * exps)
    ang = torch.einsum("...t,i->...ti", positions.to(wide), theta)
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # (..., T, d/2, 2, 2)
    xx = x.to(wide)
    pairs = xx.reshape(*xx.shape[:-1], d // 2, 2) if interleaved else torch.stack(xx.chunk(2, dim=-1), dim=-1)
    turned = torch.einsum("...ij,...j->...i", rot, pairs)
    out = turned.reshape(xx.shape) if interleaved else torch.cat(turned.unbind(-1), dim=-1)
    return out.to(x.dtype)
