"""Reference: rotary position embedding (RoPE), both pair conventions."""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    """x (..., T, d), positions broadcastable to x.shape[:-1] -> x rotated pair by pair, same shape and dtype.
    Pair i turns by angle position * base ** (-2i / d)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rope: the feature size d = {d} must be even")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32  # angles: float32 or wider
    i = torch.arange(d // 2, device=x.device, dtype=work)
    theta = base ** (-2 * i / d)  # (d/2,)
    if positions.dim() == 2:  # (B, T) position ids, as Hugging Face passes them: one row per sequence, for every head
        positions = positions[:, None, :]
    angle = positions.to(work)[..., None] * theta  # (..., T, d/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    xw = x.to(work)
    # pair i: features (2i, 2i+1) when interleaved (RoFormer, Meta's LLaMA), else (i, i + d/2) (rotate-half)
    a, b = (xw[..., 0::2], xw[..., 1::2]) if interleaved else (xw[..., : d // 2], xw[..., d // 2:])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    rotated = torch.stack((ra, rb), dim=-1).flatten(-2) if interleaved else torch.cat((ra, rb), dim=-1)
    return rotated.to(x.dtype)
