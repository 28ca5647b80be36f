"""BUG: softmax is taken over dim=1 (the query axis of (B, Tq, Tk)) instead of the last, key axis.
STAGE: the softmax
"""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=1)

    num_keys = scores.size(-1)
    lens = valid_lens.reshape(valid_lens.size(0), -1, 1)
    keep = torch.arange(num_keys, device=scores.device) < lens

    very_negative = torch.finfo(scores.dtype).min
    weights = torch.softmax(scores.masked_fill(~keep, very_negative), dim=1)
    return torch.where(keep, weights, torch.zeros_like(weights))
