"""Correct: the textbook flatten-and-sequence-mask version, with fully masked rows zeroed."""
import torch


def sequence_mask(X, valid_len, value=0.0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X = X.clone()
    X[~mask] = value
    return X


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    shape = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(scores.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    weights = torch.softmax(X.reshape(shape), dim=-1)
    return weights * (valid_lens.reshape(shape[0], shape[1], 1) > 0)
