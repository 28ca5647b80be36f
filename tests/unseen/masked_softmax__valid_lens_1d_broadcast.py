"""BUG: valid_lens.unsqueeze(-1) is right for (B, Tq) lengths but turns (B,) lengths into a (B, Tk) mask that broadcasts along the query axis (B lines up with Tq), wrong or a shape error unless B == 1.
STAGE: the mask
"""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    num_keys = scores.size(-1)
    mask = torch.arange(num_keys, device=scores.device) < valid_lens.unsqueeze(-1)
    fill = torch.finfo(scores.dtype).min
    out = F.softmax(scores.masked_fill(~mask, fill), dim=-1)
    return out.masked_fill(~mask, 0.0)
