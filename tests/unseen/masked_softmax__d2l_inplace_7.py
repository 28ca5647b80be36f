"""BUG: the original d2l X[~mask] = value on a reshape view: writes into the caller's scores
STYLE: d2l.ai masked_softmax
"""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    """d2l.ai sequence_mask."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return nn.functional.softmax(scores, dim=-1)
    shape = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(scores.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    keep = (torch.arange(shape[-1], device=scores.device)[None, :] < valid_lens[:, None])
    return (nn.functional.softmax(X, dim=-1) * keep).reshape(shape)
