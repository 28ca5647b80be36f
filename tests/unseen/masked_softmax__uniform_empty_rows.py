"""BUG: masked keys are only pushed to -1e6 before the softmax and never zeroed after it, so a row with valid_len 0 (all entries -1e6) comes out uniform instead of all zeros.
STAGE: the mask
"""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32,
                        device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(scores, valid_lens=None):
    """Perform softmax operation by masking elements on the last axis."""
    # `scores`: 3D tensor, `valid_lens`: 1D or 2D tensor
    if valid_lens is None:
        return nn.functional.softmax(scores, dim=-1)
    shape = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = scores.reshape(-1, shape[-1])
    X = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X.clone()
    # On the last axis, replace masked elements with a very large negative
    # value, whose exponentiation outputs 0
    X = sequence_mask(X, valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1).to(scores.dtype)
