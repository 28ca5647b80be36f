"""BUG: an additive -inf bias cleaned with nan_to_num: NaN gradients on rows with valid_len 0
STYLE: additive bias
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    B, Tq, Tk = scores.shape
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(B, Tq)
    keep = torch.arange(Tk, device=scores.device)[None, None, :] < valid_lens[:, :, None]
    # additive attention bias, as in an HF-style extended attention mask
    bias = torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    probs = F.softmax(scores + bias, dim=-1)
    return torch.nan_to_num(probs, nan=0.0)   # empty rows: 0/0 -> 0
