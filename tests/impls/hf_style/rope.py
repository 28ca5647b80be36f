"""RoPE as Hugging Face writes it: a cos/sin cache of (T, d) built from inv_freq and rotate_half."""
import torch


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError("head_dim must be even for rotary embeddings")
    dtype = x.dtype if x.is_floating_point() and x.element_size() >= 4 else torch.float32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, device=x.device, dtype=dtype) / dim))
    freqs = positions.to(dtype).unsqueeze(-1) * inv_freq
    if interleaved:
        emb = freqs.repeat_interleave(2, dim=-1)  # (.., T, d): each angle for features 2i and 2i+1
        x_even, x_odd = x.to(dtype)[..., ::2], x.to(dtype)[..., 1::2]
        rotated = torch.stack((-x_odd, x_even), dim=-1).reshape(x.shape)
        out = x.to(dtype) * emb.cos() + rotated * emb.sin()
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        out = x.to(dtype) * emb.cos() + rotate_half(x.to(dtype)) * emb.sin()
    return out.to(x.dtype)
