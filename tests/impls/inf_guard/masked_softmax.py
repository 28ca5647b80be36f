"""Correct: -inf fill, then a guard that turns the NaN of fully masked rows into zeros."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.nn.functional.softmax(scores, dim=-1)
    Tk = scores.size(-1)
    lens = valid_lens.view(valid_lens.size(0), -1, 1)  # (B, 1 or Tq, 1)
    mask = torch.arange(Tk, device=scores.device).view(1, 1, Tk) < lens
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)
