"""BUG: Hugging Face's .float() angles: float32 rounding in a float64 call
STYLE: Hugging Face
"""
"""Rotary embedding following Hugging Face's LlamaRotaryEmbedding: inv_freq from an int64
arange `.float()`, angles from `inv_freq.float() @ position_ids.float()` "to force float32
since bfloat16 loses precision on long contexts", cos/sin cast to x's dtype.

BUG: for float64 inputs the angles are still float32, so they are off by about
position * 2^-24 radians; the contract requires float64 angles for float64 inputs.
"""
import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError("head dim must be even")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).float() / dim))
    freqs = positions.float()[..., None] * inv_freq.float()
    if interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
        rot = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        rot = rotate_half(x)
    cos = emb.cos().to(x.dtype)
    sin = emb.sin().to(x.dtype)
    if x.dtype in (torch.float16, torch.bfloat16):
        return (x.float() * emb.cos() + rot.float() * emb.sin()).to(x.dtype)
    return x * cos + rot * sin
