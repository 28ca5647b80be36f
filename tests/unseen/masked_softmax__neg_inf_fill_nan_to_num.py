"""STYLE: common forum answer: float attention mask (0 / -inf) added to the scores, softmax, then nan_to_num to clean fully masked rows
BUG: rows with valid_len == 0 are all -inf before the softmax, so the forward is patched to 0 but the backward through those rows is NaN.
STAGE: weights (gradient)
WHEN: a row with valid_len == 0, in the backward pass (forward values are right)
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    Tk = scores.size(-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(-1)  # (B, 1): same length for every query
    key_idx = torch.arange(Tk, device=scores.device).view(1, 1, Tk)
    pad = key_idx >= valid_lens.unsqueeze(-1)  # True where the key is padding
    attn_mask = torch.zeros(pad.shape, dtype=scores.dtype, device=scores.device).masked_fill(pad, float("-inf"))
    attn = F.softmax(scores + attn_mask, dim=-1)
    return torch.nan_to_num(attn, nan=0.0)
