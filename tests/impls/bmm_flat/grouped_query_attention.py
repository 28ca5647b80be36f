"""GQA with batch and key/value heads folded into one bmm batch."""
import torch


def grouped_query_attention(queries, keys, values, mask=None):
    B, Hq, Tq, d = queries.shape
    _, Hkv, Tk, dv = values.shape
    if Hq % Hkv:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    scores = torch.bmm(queries.reshape(B * Hkv, G * Tq, d), keys.reshape(B * Hkv, Tk, d).transpose(1, 2))
    scores = (scores * d ** -0.5).view(B, Hq, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(-1, keepdim=True)
    weights = e / torch.where(total > 0, total, torch.ones_like(total))
    out = torch.bmm(weights.reshape(B * Hkv, G * Tq, Tk), values.reshape(B * Hkv, Tk, dv))
    return out.view(B, Hq, Tq, dv), weights
