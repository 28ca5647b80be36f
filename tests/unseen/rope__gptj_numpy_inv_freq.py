"""BUG: none
STYLE: a NumPy float64 inv_freq, einsum over any positions shape, duplicate_interleave
"""
"""Rotary embedding after GPT-J's fixed_pos_embedding: inv_freq from NumPy in float64, the
sinusoid table by einsum over whatever shape `positions` has, duplicate_interleave for GPT-J's
adjacent pairs, and the NeoX halves otherwise.
"""
import numpy as np
import torch


def _sincos(positions, dim, base, dtype):
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2) / dim))            # float64
    inv = torch.from_numpy(inv_freq).to(device=positions.device, dtype=dtype)
    sinusoid_inp = torch.einsum("...,j->...j", positions.to(dtype), inv)
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)


def _duplicate_interleave(m):
    return torch.repeat_interleave(m, 2, dim=-1)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2 == 1:
        raise ValueError("odd rotary dimension")
    dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    sin, cos = _sincos(positions, dim, base, dtype)
    xf = x.to(dtype)
    if interleaved:
        sin, cos = _duplicate_interleave(sin), _duplicate_interleave(cos)
        x1, x2 = xf[..., ::2], xf[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).reshape(xf.shape)
        out = xf * cos + rot * sin
    else:
        h = dim // 2
        a, b = xf[..., :h], xf[..., h:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    return out.to(x.dtype)
