"""BUG: the cos/sin table is built for rows 0..T-1 and sliced by sequence length (old HF LlamaRotaryEmbedding(seq_len) habit), so the given positions are ignored: wrong whenever they do not start at 0.
STAGE: the angles
"""
import torch


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_pairs(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _cos_sin_cache(seq_len, dim, base, dtype, device):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim))
    t = torch.arange(seq_len, device=device, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq).to(dtype)
    return freqs.cos(), freqs.sin()


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"RoPE needs an even feature size, got {dim}")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    seq_len = x.shape[-2]
    cos, sin = _cos_sin_cache(seq_len, dim, base, work, x.device)
    if interleaved:
        cos = cos.repeat_interleave(2, dim=-1)
        sin = sin.repeat_interleave(2, dim=-1)
        rotate = _rotate_pairs
    else:
        cos = torch.cat((cos, cos), dim=-1)
        sin = torch.cat((sin, sin), dim=-1)
        rotate = _rotate_half
    xw = x.to(work)
    out = xw * cos + rotate(xw) * sin
    return out.to(x.dtype)
