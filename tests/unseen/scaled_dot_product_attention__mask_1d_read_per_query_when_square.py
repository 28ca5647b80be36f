"""1-D mask read as a per-query mask when its length equals Tq (Tq == Tk).
BUG: 1-D mask read as a per-query mask when its length equals Tq (Tq == Tk)."""
import math
import torch


def _msoftmax(s, allowed):
    if allowed is None:
        return torch.softmax(s, dim=-1)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(-1, -2) / math.sqrt(d)
    if mask is not None and mask.dim() == 1 and mask.shape[0] == scores.shape[-2]:
        mask = mask[:, None]
    w = _msoftmax(scores, mask)
    return w @ values, w
