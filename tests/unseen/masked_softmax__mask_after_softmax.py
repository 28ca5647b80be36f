"""BUG: the plain softmax is taken over all keys and the padded keys are zeroed afterwards, without renormalising, so valid weights do not sum to 1.
STAGE: the softmax
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    weights = F.softmax(scores, dim=-1)
    if valid_lens is None:
        return weights
    B, Tq, Tk = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(B, Tq)
    mask = torch.arange(Tk, device=scores.device)[None, None, :] < valid_lens[:, :, None]
    return weights * mask.to(weights.dtype)
