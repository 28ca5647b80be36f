"""BUG: none
STYLE: decode-kernel trick (as in vLLM / llama.cpp reference paths): fold the G query heads of a group into the query axis, (B, Hkv, G*Tq, d) @ (B, Hkv, d, Tk), no K/V repetition.
"""
import math
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv, Tk, dv = keys.shape[1], keys.shape[2], values.shape[-1]
    if Hkv == 0 or Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    q = queries.reshape(B, Hkv, G * Tq, d)
    scores = torch.matmul(q, keys.transpose(-1, -2)).view(B, Hq, Tq, Tk) * (1.0 / math.sqrt(d))
    if mask is not None:
        allowed = torch.broadcast_to(mask, (B, Hq, Tq, Tk))
        live = allowed.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~live, 0.0)
        weights = torch.softmax(scores, dim=-1).masked_fill(~live, 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights.reshape(B, Hkv, G * Tq, Tk), values).view(B, Hq, Tq, dv)
    return out, weights
