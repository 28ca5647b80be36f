"""BUG: none
STYLE: masked_fill with the dtype's most negative finite value, mask built with arange against valid_lens.reshape(B, -1, 1) (covers both (B,) and (B, Tq)), then torch.where zeroes masked keys.
"""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)

    num_keys = scores.size(-1)
    # (B,) -> (B, 1, 1) and (B, Tq) -> (B, Tq, 1): both broadcast against (B, Tq, Tk)
    lens = valid_lens.reshape(valid_lens.size(0), -1, 1)
    keep = torch.arange(num_keys, device=scores.device) < lens

    very_negative = torch.finfo(scores.dtype).min
    weights = torch.softmax(scores.masked_fill(~keep, very_negative), dim=-1)
    # a row where nothing is kept is uniform after the softmax; the where() makes it all zeros
    return torch.where(keep, weights, torch.zeros_like(weights))
