"""Reference: softmax over a sliding window of keys."""
import torch


def banded_softmax(scores, window=None):
    """scores: (B, Tq, Tk); window: None or int w -> weights (B, Tq, Tk); key j allowed when 0 <= i+Tk-Tq-j < w."""
    if window is None:
        return torch.softmax(scores, dim=-1)
    Tq, Tk = scores.shape[-2], scores.shape[-1]
    back = torch.arange(Tq, device=scores.device)[:, None] + (Tk - Tq) - torch.arange(Tk, device=scores.device)
    keep = (back >= 0) & (back < window)  # (Tq, Tk)
    filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1) * keep
