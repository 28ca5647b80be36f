"""RoPE pair by pair in a Python loop, writing into a fresh tensor."""
import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d")
    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    pos = positions.to(work)
    xx = x.to(work)
    out = torch.empty(torch.broadcast_shapes(xx.shape, pos.shape + (d,)), dtype=work, device=x.device)
    for i in range(d // 2):
        theta = base ** (-2.0 * i / d)
        c, s = torch.cos(pos * theta), torch.sin(pos * theta)
        ia, ib = (2 * i, 2 * i + 1) if interleaved else (i, i + d // 2)
        a, b = xx[..., ia], xx[..., ib]
        out[..., ia] = a * c - b * s
        out[..., ib] = a * s + b * c
    return out.to(x.dtype)
