"""STYLE: GPT-NeoX RotaryEmbedding (cos/sin tables gathered by position, rotate_half / rotate_every_two)
BUG: none
STAGE: none
WHEN: never
"""
import torch


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _rotate_every_two(x):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).reshape(x.shape)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"rotary embedding needs an even dim, got {dim}")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32

    pos = positions.to(device=x.device, dtype=compute)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=x.device, dtype=compute) / dim))
    freqs = pos.unsqueeze(-1) * inv_freq  # (..., T, dim/2)
    if interleaved:
        emb = torch.stack((freqs, freqs), dim=-1).flatten(-2)  # f0 f0 f1 f1 ...
        rotate = _rotate_every_two
    else:
        emb = torch.cat((freqs, freqs), dim=-1)  # f0 f1 ... f0 f1 ...
        rotate = _rotate_half
    cos, sin = emb.cos(), emb.sin()

    xc = x.to(compute)
    return (xc * cos + rotate(xc) * sin).to(x.dtype)
