"""BUG: alibi_slopes returns float64 and alibi_attention never casts slopes to the inputs' dtype, so the bias promotes float32 scores to float64 and output/weights come back float64 for float32 inputs (any float32 call, e.g. B=2, H=4, Tq=5, Tk=7).
STAGE: the scores (their dtype)
STYLE: HF BLOOM build_alibi_tensor with the bias added out of place
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
    Tk = keys.shape[-2]
    dtype, dev = queries.dtype, queries.device
    if slopes is None:
        slopes = alibi_slopes(H)
    slopes = slopes.to(device=dev)
    inv_norm_factor = 1.0 / math.sqrt(d)
    pos = torch.arange(Tq, device=dev)[:, None] + (Tk - Tq)
    arange_tensor = torch.arange(Tk, device=dev)[None, :]
    if is_causal:
        # BLOOM: alibi = slopes[..., None] * arange; a constant shift per row, same softmax
        alibi = slopes[:, None, None] * arange_tensor[None]
    else:
        alibi = -slopes[:, None, None] * (pos - arange_tensor).abs()[None]
    alibi = alibi.unsqueeze(0).expand(B, H, Tq, Tk).reshape(B * H, Tq, Tk)
    matmul_result = alibi + torch.bmm(queries.reshape(B * H, Tq, d), keys.reshape(B * H, Tk, d).transpose(-1, -2)) * inv_norm_factor
    attention_scores = matmul_result.view(B, H, Tq, Tk)
    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=dev)
    if is_causal:
        allowed = allowed & (arange_tensor <= pos)
    if mask is not None:
        allowed = allowed & mask.to(device=dev, dtype=torch.bool)
    allowed = allowed.expand(B, H, Tq, Tk)
    input_dtype = attention_scores.dtype
    if input_dtype in (torch.float16, torch.bfloat16):
        attention_scores = attention_scores.to(torch.float32)
    attn_weights = attention_scores.masked_fill(~allowed, torch.finfo(attention_scores.dtype).min)
    attention_probs = torch.softmax(attn_weights, dim=-1) * allowed
    attention_probs = attention_probs.to(input_dtype)
    output = attention_probs @ values.to(input_dtype)
    return output, attention_probs
