"""BUG: none
STYLE: d2l sequence_mask made out of place, a fill of -1e6 clamped to the dtype's range, then multiplied by the keep mask
"""
"""Masked softmax after d2l.ai (section 11.3), made safe for empty rows and out of place."""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0.0):
    """Mask irrelevant entries in sequences (returns a new tensor and the keep-mask)."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    return X.masked_fill(~mask, value), mask


def masked_softmax(scores, valid_lens=None):
    """Perform softmax operation by masking elements on the last axis."""
    # X: 3D tensor, valid_lens: 1D or 2D tensor
    if valid_lens is None:
        return nn.functional.softmax(scores, dim=-1)
    shape = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    # On the last axis, replace masked elements with a very large negative
    # value, whose exponentiation outputs 0 (clamped so float16 does not overflow)
    fill = max(-1e6, torch.finfo(scores.dtype).min)
    X, keep = sequence_mask(scores.reshape(-1, shape[-1]), valid_lens, value=fill)
    # a row with valid_len == 0 comes out uniform from softmax: the keep-mask zeroes it
    return (nn.functional.softmax(X, dim=-1) * keep).reshape(shape)
