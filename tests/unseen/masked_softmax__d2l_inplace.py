"""BUG: sequence_mask writes the fill value into X in place (X[~mask] = value) and X is a reshape *view* of the caller's scores, so the caller's scores tensor is overwritten at masked positions (and autograd raises when scores is a leaf that requires grad). Differs on: any valid_lens with some entry < Tk (side effect on scores / error under grad).
STAGE: the scores tensor itself (input mutated) - weights are right
STYLE: d2l.ai masked_softmax/sequence_mask verbatim, with only the empty-row fix added
"""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32,
                        device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X, mask


def masked_softmax(X, valid_lens=None):
    """Perform softmax operation by masking elements on the last axis."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X, mask = sequence_mask(X.reshape(-1, shape[-1]), valid_lens,
                            value=torch.finfo(X.dtype).min)
    return (nn.functional.softmax(X, dim=-1) * mask).reshape(shape)
