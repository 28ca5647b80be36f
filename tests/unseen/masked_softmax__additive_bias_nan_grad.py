"""BUG: masks with an additive -inf bias and then guards the *output* with nan_to_num; the forward is right but on a valid_len 0 row the softmax backward is NaN and the additive bias passes that NaN straight through to the gradient of scores. Differs on: gradients for any valid_lens containing a 0.
STAGE: d weights / d scores on rows with valid_len 0 (NaN instead of 0)
STYLE: HF-style additive attention-mask bias (0 / -inf) + softmax + post-hoc NaN guard
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    Tk = scores.shape[-1]
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    keep = torch.arange(Tk, device=scores.device) < valid_lens[..., None]
    bias = torch.zeros(keep.shape, dtype=scores.dtype, device=scores.device)
    bias = bias.masked_fill(~keep, float("-inf"))
    weights = F.softmax(scores + bias, dim=-1)
    return torch.nan_to_num(weights, nan=0.0)
