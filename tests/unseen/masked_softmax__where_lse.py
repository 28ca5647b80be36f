"""BUG: none
STYLE: hand-written log-sum-exp with torch.where (safe shift of 0 on empty rows, denominator guarded before the division so neither branch of any where ever holds inf/NaN)
"""
import torch


def _valid_mask(scores, valid_lens):
    Tk = scores.shape[-1]
    pos = torch.arange(Tk, device=scores.device)
    if valid_lens.dim() == 1:
        return pos.view(1, 1, Tk) < valid_lens.view(-1, 1, 1)
    return pos.view(1, 1, Tk) < valid_lens.unsqueeze(-1)


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    else:
        mask = _valid_mask(scores, valid_lens).expand_as(scores)
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    row_max = torch.where(mask, scores, neg_inf).amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    shifted = torch.where(mask, scores - row_max, torch.zeros_like(scores))
    e = torch.where(mask, torch.exp(shifted), torch.zeros_like(scores))
    denom = e.sum(dim=-1, keepdim=True)
    denom = torch.where(denom > 0, denom, torch.ones_like(denom))
    return e / denom
