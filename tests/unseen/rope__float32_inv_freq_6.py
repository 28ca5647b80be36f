"""BUG: inv_freq and the angles are computed in float32 (Hugging Face's inv_freq.float() @ position_ids.float()) and cos/sin only cast to x.dtype afterwards, so float64 inputs get float32-accurate angles (error ~ position * 6e-8 rad). Differs on: float64 inputs (visible already at position ~10, large at positions >= 1e4); float32 is fine.
STAGE: inv_freq (float32) -> angles
STYLE: Hugging Face LlamaRotaryEmbedding + apply_rotary_pos_emb (rotate_half), GPT-J path for interleaved
"""
import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, positions, base=10000.0, interleaved=False):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError("odd dim")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64, device=x.device).float() / dim))
    freqs = positions.to(x.device).float()[..., None] * inv_freq.float()
    if interleaved:
        cos = freqs.cos().repeat_interleave(2, -1).to(x.dtype)
        sin = freqs.sin().repeat_interleave(2, -1).to(x.dtype)
        x1, x2 = x[..., ::2], x[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).flatten(-2)
        return x * cos + rot * sin
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return (x * cos) + (rotate_half(x) * sin)
