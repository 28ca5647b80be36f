"""STYLE: d2l.ai masked_softmax with sequence_mask (X[~mask] = value on a reshaped view)
BUG: sequence_mask writes the fill value into a view of the caller's scores, so the input tensor is modified in place.
STAGE: inputs
WHEN: valid_lens given: the caller's scores are overwritten at masked positions (a leaf scores tensor that requires grad raises instead); the returned weights are right
"""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0.0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X, mask


def masked_softmax(scores, valid_lens=None):
    """Perform softmax operation by masking elements on the last axis."""
    # scores: 3D tensor, valid_lens: 1D or 2D tensor
    if valid_lens is None:
        return nn.functional.softmax(scores, dim=-1)
    shape = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    # On the last axis, replace masked elements with a very large negative value, whose exponentiation outputs 0
    flat, mask = sequence_mask(scores.reshape(-1, shape[-1]), valid_lens, value=torch.finfo(scores.dtype).min)
    weights = nn.functional.softmax(flat, dim=-1) * mask
    return weights.reshape(shape)
