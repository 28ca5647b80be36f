"""Softmax in float32 when Tk > 64 (float64 precision lost on long inputs).
BUG: softmax in float32 when Tk > 64 (float64 precision lost on long inputs)."""
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
    if scores.shape[-1] > 64:
        scores = scores.float()
    w = _msoftmax(scores, mask).to(queries.dtype)
    return w @ values, w
