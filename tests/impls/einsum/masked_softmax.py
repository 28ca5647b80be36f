"""Correct: torch.where with a finite fill, then zeroing."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return scores.softmax(-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(1).expand(-1, scores.shape[1])
    mask = torch.arange(scores.shape[-1], device=scores.device)[None, None, :] < valid_lens.unsqueeze(-1)
    w = torch.where(mask, scores, torch.full_like(scores, -1e9)).softmax(-1)
    return torch.where(mask, w, torch.zeros_like(w))
