"""BUG: none
STYLE: GPT-NeoX's rotate_half, and GPT-J's rotate_every_two for interleaved pairs
"""
"""Rotary embedding, GPT-NeoX / Hugging Face LLaMA style (rotate_half), with GPT-J's
rotate_every_two for interleaved pairs. Angles in the input's dtype (float32 for half types).
"""
import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"rotary dimension must be even, got {dim}")
    cdtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).to(cdtype) / dim))
    freqs = positions.to(device=x.device, dtype=cdtype)[..., None] * inv_freq
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)
        rotated = rotate_every_two(x)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        rotated = rotate_half(x)
    cos, sin = emb.cos(), emb.sin()
    out = x.to(cdtype) * cos + rotated.to(cdtype) * sin
    return out.to(x.dtype)
