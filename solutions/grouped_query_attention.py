"""Reference: grouped-query attention, without repeating keys or values per query head."""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    """queries (B, Hq, Tq, d), keys (B, Hkv, Tk, d), values (B, Hkv, Tk, dv) -> output (B, Hq, Tq, dv),
    weights (B, Hq, Tq, Tk). Query head n reads key/value head n // G, G = Hq // Hkv."""
    B, Hq, Tq, d = queries.shape
    Hkv, Tk = keys.shape[1], keys.shape[2]
    if Hq % Hkv:
        raise ValueError(f"grouped_query_attention: Hq = {Hq} query heads is not a multiple of Hkv = {Hkv}")
    G = Hq // Hkv
    q = queries.reshape(B, Hkv, G * Tq, d)  # the G query heads of a group, folded into its query axis
    scores = q @ keys.transpose(-2, -1) / d**0.5  # (B, Hkv, G*Tq, Tk): each key head read once, never copied
    scores = scores.reshape(B, Hq, Tq, Tk)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = torch.softmax(filled, dim=-1) * mask
    output = weights.reshape(B, Hkv, G * Tq, Tk) @ values  # (B, Hkv, G*Tq, dv)
    return output.reshape(B, Hq, Tq, -1), weights
