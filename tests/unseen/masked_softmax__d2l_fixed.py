"""BUG: none
STYLE: d2l.ai masked_softmax + sequence_mask (repeat_interleave of valid_lens, flatten to 2-D), fixed for the contract: out-of-place fill with finfo.min and the mask multiplied back in so a valid_len 0 row is all zeros instead of uniform.
"""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences (returns a new tensor and the mask)."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32,
                        device=X.device)[None, :] < valid_len[:, None]
    return X.masked_fill(~mask, value), mask


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
    # On the last axis, replace masked elements with a very large negative value
    X, mask = sequence_mask(scores.reshape(-1, shape[-1]), valid_lens,
                            value=torch.finfo(scores.dtype).min)
    out = nn.functional.softmax(X, dim=-1) * mask
    return out.reshape(shape)
