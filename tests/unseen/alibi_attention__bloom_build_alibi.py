"""BUG: none
STYLE: BLOOM's slopes (float64), a slope * j causal bias, baddbmm, a finfo.min fill and zeroed rows
"""
"""ALiBi attention in the style of Hugging Face's BLOOM (build_alibi_tensor + baddbmm).

Slopes: BLOOM's closest-power-of-two construction (computed in float64 here). Causal bias:
BLOOM's `slope * j` (key position), which differs from `-slope * (pos(i) - j)` by a constant per
row. Non-causal: the symmetric `-slope * |pos(i) - j|`.
"""
import math

import torch


def alibi_slopes(num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float64)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float64)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    B, H, Tq, d = queries.shape
    Tk = keys.shape[2]
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(dtype=queries.dtype, device=queries.device)
    dev = queries.device
    key_pos = torch.arange(Tk, device=dev, dtype=queries.dtype)
    query_pos = torch.arange(Tq, device=dev, dtype=queries.dtype) + (Tk - Tq)
    if is_causal:
        alibi = slopes[:, None, None] * key_pos[None, None, :]             # (H, 1, Tk)
        allowed = key_pos[None, :] <= query_pos[:, None]
    else:
        alibi = -slopes[:, None, None] * (query_pos[:, None] - key_pos[None, :]).abs()
        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=dev)
    if mask is not None:
        allowed = allowed & mask
    allowed = allowed.expand(B, H, Tq, Tk)

    inv_norm_factor = 1.0 / math.sqrt(d)
    q = queries.reshape(B * H, Tq, d)
    k = keys.reshape(B * H, Tk, d)
    bias = alibi.expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
    scores = bias.baddbmm(batch1=q, batch2=k.transpose(1, 2), beta=1.0, alpha=inv_norm_factor)
    scores = scores.view(B, H, Tq, Tk)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1) * allowed      # a row with no allowed key becomes 0
    out = probs @ values
    return out, probs
