"""BUG: rotate_half returns cat(x2, -x1) instead of cat(-x2, x1) (and the pairwise twin stacks (x2, -x1)), so every pair turns by -angle; norms and relative-position invariance still hold.
STAGE: the rotation
"""
import torch


def _rotate_half_(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((x2, -x1), dim=-1)


def _rotate_every_two_(x):
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((x2, -x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"RoPE needs an even feature size, got {dim}")
    compute_dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=x.device) / dim))
    freqs = positions.to(device=x.device, dtype=compute_dtype)[..., None] * inv_freq.to(compute_dtype)
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)
        rotate = _rotate_every_two_
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        rotate = _rotate_half_
    xc = x.to(compute_dtype)
    out = xc * emb.cos() + rotate(xc) * emb.sin()
    return out.to(x.dtype)
