"""STYLE: JAX/Flax functional code (jnp.where masking, explicit broadcast helpers) ported to torch
BUG: A (B, Tk) key mask built from 1-D valid_lens is given its new axis last instead of in the middle, so it masks query rows instead of key columns.
STAGE: masked scores
WHEN: valid_lens of shape (B,) with Tq == Tk and some length < Tk (with Tq != Tk it raises a broadcast error).
"""
import torch


def _length_mask(lengths, maxlen):
    return torch.arange(maxlen, device=lengths.device) < lengths[..., None]


def _expand_dims(x, axis):
    return torch.unsqueeze(x, axis)


def _softmax(x, axis=-1):
    x_max = torch.amax(x, dim=axis, keepdim=True)
    unnormalized = torch.exp(x - x_max.detach())
    return unnormalized / torch.sum(unnormalized, dim=axis, keepdim=True)


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return _softmax(scores)
    mask = _length_mask(valid_lens, scores.shape[-1])  # (B, Tk) or (B, Tq, Tk)
    if mask.ndim < scores.ndim:
        mask = _expand_dims(mask, -1)
    big_neg = torch.finfo(scores.dtype).min
    logits = torch.where(mask, scores, torch.full_like(scores, big_neg))
    weights = _softmax(logits)
    return torch.where(mask, weights, torch.zeros_like(weights))
