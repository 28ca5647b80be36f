"""BUG: none
STYLE: d2l.ai style (sequence_mask helper on a flattened copy, -1e6 fill, repeat_interleave for 1-D lengths), with the softmax output multiplied by the mask so empty rows come out as zeros, and float32 for half inputs.
"""
import torch
from torch import nn
from torch.nn import functional as F


def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences (X is 2-D: rows x maxlen)."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32,
                        device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X, mask


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
    # work on a copy: never touch the caller's tensor; -1e6 does not fit in half precision
    if X.dtype in (torch.float16, torch.bfloat16):
        X = X.float()
    else:
        X = X.clone()
    # On the last axis, replace masked elements with a very large negative
    # value, whose exponentiation outputs 0
    X, mask = sequence_mask(X, valid_lens, value=-1e6)
    weights = F.softmax(X, dim=-1) * mask.to(X.dtype)  # a row with valid_len 0 would be uniform otherwise
    return weights.reshape(shape).to(scores.dtype)
