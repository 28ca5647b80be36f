"""BUG: none
STYLE: unflatten into a group axis, the mask regrouped without a copy, einsum
"""
import torch


def _group_mask(mask, Hq, Hkv):
    """Bring a (.., Hq|1, Tq|1, Tk|1) boolean mask to (.., Hkv|1, G|1, Tq|1, Tk|1) without copying."""
    m = mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    if m.size(1) == Hq and Hq != 1:
        return m.unflatten(1, (Hkv, Hq // Hkv))
    return m.unsqueeze(2)


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    Hkv = keys.size(1)
    if Hkv < 1 or Hq % Hkv:
        raise ValueError("Hq must be divisible by Hkv")
    q = queries.unflatten(1, (Hkv, Hq // Hkv))                        # (B, Hkv, G, Tq, d)
    s = torch.einsum("bhgqd,bhkd->bhgqk", q, keys) * (1.0 / d ** 0.5)
    if mask is not None:
        allowed = _group_mask(mask, Hq, Hkv)
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).min)  # -inf rows -> finite
        e = torch.exp(s - m.detach())
        w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    else:
        w = s.softmax(-1)
    o = torch.einsum("bhgqk,bhkv->bhgqv", w, values)
    return o.flatten(1, 2), w.flatten(1, 2)
