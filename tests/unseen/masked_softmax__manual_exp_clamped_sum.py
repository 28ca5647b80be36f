"""BUG: none
STYLE: softmax written out by hand (course-solution style): subtract the (detached) max over valid keys, exponentiate, and divide by the row sum clamped to >= 1 (exactly 1 is the smallest a row with any valid key can have, and an empty row sums to 0, giving 0 / 1 = 0).
"""
import torch


def masked_softmax(scores, valid_lens=None):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    B, Tq, Tk = x.shape

    if valid_lens is None:
        valid = torch.ones(B, Tq, Tk, dtype=torch.bool, device=x.device)
    else:
        if valid_lens.dim() == 1:
            lens = valid_lens.unsqueeze(1).expand(B, Tq)
        else:
            lens = valid_lens
        valid = torch.arange(Tk, device=x.device).view(1, 1, Tk) < lens.unsqueeze(-1)

    x = x.masked_fill(~valid, float("-inf"))
    row_max = x.amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))

    e = torch.exp(x - row_max)                       # masked keys: exp(-inf) = 0
    denom = e.sum(dim=-1, keepdim=True).clamp(min=1.0)
    return (e / denom).to(scores.dtype)
