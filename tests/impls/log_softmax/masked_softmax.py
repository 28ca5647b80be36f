"""exp(log_softmax) with a finite fill; masked weights multiplied out."""
import torch
import torch.nn.functional as F


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.log_softmax(scores, dim=-1).exp()
    Tk = scores.shape[-1]
    lens = valid_lens.view(valid_lens.shape[0], -1, 1)
    keep = torch.arange(Tk, device=scores.device).view(1, 1, Tk) < lens
    filled = torch.where(keep, scores, torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype, device=scores.device))
    return F.log_softmax(filled, dim=-1).exp() * keep
