"""BUG: none
STYLE: GPT-NeoX / Hugging Face rotate_half with emb = cat(freqs, freqs) for interleaved=False, and GPT-J rotate_every_two with repeat_interleave'd sin/cos for interleaved=True
"""
import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError("head dim must be even for rotary embeddings")
    dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).to(dtype) / dim))
    freqs = positions.to(device=x.device, dtype=dtype)[..., None] * inv_freq     # (..., T, d/2)
    if interleaved:
        sin = torch.repeat_interleave(freqs.sin(), 2, dim=-1)
        cos = torch.repeat_interleave(freqs.cos(), 2, dim=-1)
        out = x.to(dtype) * cos + rotate_every_two(x.to(dtype)) * sin
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        out = (x.to(dtype) * cos) + (rotate_half(x.to(dtype)) * sin)
    return out.to(x.dtype)
