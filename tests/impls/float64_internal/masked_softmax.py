"""Computes in float64 whatever comes in, and casts back."""
import torch


def masked_softmax(scores, valid_lens=None):
    x = scores.to(torch.float64)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(-1)
        keep = torch.arange(x.shape[-1], device=x.device) < lens.unsqueeze(-1)
        x = x.masked_fill(~keep, -1e300)
    w = torch.exp(x - x.amax(-1, keepdim=True))
    w = w / w.sum(-1, keepdim=True)
    if valid_lens is not None:
        w = w * keep
    return w.to(scores.dtype)
