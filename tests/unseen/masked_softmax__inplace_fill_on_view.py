"""BUG: the -1e6 fill is written through scores.reshape(...), which is a view, so the caller's scores tensor is modified in place (and autograd refuses it when scores is a leaf that requires grad).
STAGE: the mask
"""
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X, mask


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return nn.functional.softmax(scores, dim=-1)
    shape = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = scores.reshape(-1, shape[-1])
    if X.dtype in (torch.float16, torch.bfloat16):
        X = X.float()
    X, mask = sequence_mask(X, valid_lens, value=-1e6)
    weights = nn.functional.softmax(X, dim=-1) * mask.to(X.dtype)
    return weights.reshape(shape).to(scores.dtype)
