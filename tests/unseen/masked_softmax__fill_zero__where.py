"""Masked scores replaced by 0 with torch.where before a plain softmax (a common tutorial slip)."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return scores.softmax(dim=-1)
    Tk = scores.size(-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(1)
    keep = torch.arange(Tk, device=scores.device).view(1, 1, Tk) < valid_lens.unsqueeze(-1)
    return torch.where(keep, scores, torch.zeros_like(scores)).softmax(dim=-1) * keep
