"""BUG: none
STYLE: masked_fill with finfo.min, softmax, then torch.where zeroing masked entries
"""
import torch


def _keep_mask(scores, valid_lens):
    B, Tq, Tk = scores.shape
    if valid_lens is None:
        return torch.ones(1, 1, Tk, dtype=torch.bool, device=scores.device)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(-1)  # (B, Tq) or (B, 1)
    return torch.arange(Tk, device=scores.device) < lens.unsqueeze(-1)


def masked_softmax(scores, valid_lens=None):
    keep = _keep_mask(scores, valid_lens)
    min_dtype = torch.finfo(scores.dtype).min
    attn = torch.softmax(scores.masked_fill(~keep, min_dtype), dim=-1)
    # fully masked rows would otherwise attend uniformly (same trick as HF's
    # `_unmask_unattended`, but zeroing instead)
    return torch.where(keep, attn, attn.new_zeros(()))
