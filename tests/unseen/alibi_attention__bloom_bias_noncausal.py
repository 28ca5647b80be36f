"""BUG: BLOOM's slope*j bias used in the non-causal mode too (only a row constant under the causal mask; without it the bias must be symmetric).
STAGE: the catalogue's signed_distance
"""
import math
import torch


def alibi_slopes(num_heads):
    if type(num_heads) is not int or num_heads < 1:
        raise ValueError("num_heads must be a positive int")
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32
        )
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[2]
    dev, dt = queries.device, queries.dtype
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(device=dev, dtype=dt)

    scores = torch.einsum("bhqd,bhkd->bhqk", queries, keys) * (1.0 / math.sqrt(d))
    key_pos = torch.arange(Tk, device=dev, dtype=dt)
    q_pos = torch.arange(Tq, device=dev, dtype=dt) + (Tk - Tq)
    alibi = slopes[:, None, None] * key_pos[None, None, :]  # (H, 1, Tk)
    scores = scores + alibi

    keep = torch.ones(1, 1, Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        keep = keep & (key_pos[None, :] <= q_pos[:, None])
    if mask is not None:
        keep = keep & mask
    keep = keep.expand(B, H, Tq, Tk)

    scores = torch.where(keep, scores, torch.finfo(dt).min)
    weights = torch.softmax(scores, dim=-1)
    weights = torch.where(keep, weights, torch.zeros((), dtype=dt, device=dev))
    output = torch.einsum("bhqk,bhkd->bhqd", weights, values)
    return output, weights
