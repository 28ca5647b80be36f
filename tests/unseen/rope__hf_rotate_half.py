"""BUG: none
STYLE: Hugging Face / GPT-NeoX style: inv_freq, freqs = pos x inv_freq, emb = cat(freqs, freqs), x * cos + rotate_half(x) * sin; the interleaved layout uses repeat_interleave'd cos/sin and rotate_every_two.
"""
import torch


def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _rotate_every_two(x):
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"RoPE needs an even feature size, got {dim}")
    if x.dtype in (torch.float32, torch.float64):
        compute_dtype = x.dtype
    else:
        compute_dtype = torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=x.device) / dim))
    inv_freq = inv_freq.to(compute_dtype)
    freqs = positions.to(device=x.device, dtype=compute_dtype)[..., None] * inv_freq
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)
        rotate = _rotate_every_two
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        rotate = _rotate_half
    cos = emb.cos()
    sin = emb.sin()
    xc = x.to(compute_dtype)
    out = xc * cos + rotate(xc) * sin
    return out.to(x.dtype)
