"""STYLE: hand-written stable softmax (max shift, exp, normalise) with torch.where masking, as in a numerics course
BUG: none
STAGE: none
WHEN: never
"""
import torch


def masked_softmax(scores, valid_lens=None):
    work = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype
    s = scores.to(work)

    if valid_lens is None:
        e = torch.exp(s - s.amax(dim=-1, keepdim=True))
        return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)

    if valid_lens.dim() == 1:
        lens = valid_lens.view(-1, 1, 1)  # (B, 1, 1)
    else:
        lens = valid_lens.unsqueeze(-1)  # (B, Tq, 1)
    keep = torch.arange(s.shape[-1], device=s.device) < lens  # (B, Tq|1, Tk)

    zero = torch.zeros((), dtype=work, device=s.device)
    lowest = torch.tensor(torch.finfo(work).min, dtype=work, device=s.device)
    row_max = torch.where(keep, s, lowest).amax(dim=-1, keepdim=True)
    # exponentiate only where allowed, so masked (possibly huge) scores can never overflow
    e = torch.where(keep, torch.exp(torch.where(keep, s - row_max, zero)), zero)
    total = e.sum(dim=-1, keepdim=True)
    return (e / torch.where(total > 0, total, torch.ones_like(total))).to(scores.dtype)
