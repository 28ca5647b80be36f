"""BUG: none
STYLE: BLOOM (Hugging Face transformers build_alibi_tensor) style: slopes from a torch.pow of a
base, the causal bias slopes[n] * j (a constant per row away from -slope * (pos(i) - j)) fed to
torch.baddbmm with alpha = 1/sqrt(d), a finfo.min fill, softmax, and masked rows zeroed.
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise ValueError(f"num_heads must be an int, got {num_heads!r}")
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float64)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float64
        )
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dtype = queries.dtype
    cdt = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    dev = queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(device=dev, dtype=dtype).to(cdt)

    q = queries.to(cdt).reshape(B * H, Tq, d)
    k = keys.to(cdt).reshape(B * H, Tk, d)
    v = values.to(cdt)

    key_pos = torch.arange(Tk, device=dev)
    query_pos = torch.arange(Tq, device=dev) + (Tk - Tq)
    if is_causal:
        # BLOOM: alibi = slopes * arange(Tk); differs from -slope * (pos(i) - j) by slope * pos(i).
        alibi = slopes[:, None, None] * key_pos.to(cdt)[None, None, :]  # (H, 1, Tk)
        allowed = key_pos[None, :] <= query_pos[:, None]
    else:
        dist = (query_pos[:, None] - key_pos[None, :]).abs().to(cdt)
        alibi = -slopes[:, None, None] * dist  # (H, Tq, Tk)
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=dev)
    alibi = alibi.unsqueeze(0).expand(B, H, alibi.shape[-2], Tk).reshape(B * H, alibi.shape[-2], Tk)

    scores = torch.baddbmm(alibi, q, k.transpose(1, 2), beta=1.0, alpha=1.0 / math.sqrt(d))
    scores = scores.view(B, H, Tq, Tk)

    allowed = allowed.expand(B, H, Tq, Tk)
    if mask is not None:
        allowed = allowed & mask.to(dev).expand(B, H, Tq, Tk)
    scores = scores.masked_fill(~allowed, torch.finfo(cdt).min)
    probs = torch.softmax(scores, dim=-1)
    weights = probs * allowed.to(cdt)
    output = torch.matmul(weights, v)
    return output.to(dtype), weights.to(dtype)
