"""BUG: exp(0 - max) on masked slots, then multiplied by 0: inf * 0 = NaN in float32 near -1e4
STYLE: exp, mask, normalise by hand
"""
import torch


def masked_softmax(scores, valid_lens=None):
    """Row-by-row masked softmax, computed in float64 and cast back."""
    B, Tq, Tk = scores.shape
    dev = scores.device
    x = scores.to(torch.float64)
    if valid_lens is None:
        lens = torch.full((B, Tq), Tk, dtype=torch.long, device=dev)
    elif valid_lens.dim() == 1:
        lens = valid_lens.view(B, 1).expand(B, Tq)
    else:
        lens = valid_lens
    col = torch.arange(Tk, device=dev)
    zero = torch.zeros((), dtype=x.dtype, device=dev)
    out = []
    for b in range(B):
        keep = col.unsqueeze(0) < lens[b].unsqueeze(1)          # (Tq, Tk)
        xb = torch.where(keep, x[b], zero)
        m = xb.masked_fill(~keep, float("-inf")).amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, zero).detach()    # shift only, no gradient needed
        e = torch.exp(xb - m) * keep
        s = e.sum(dim=-1, keepdim=True)
        out.append(e / s.clamp_min(torch.finfo(torch.float64).tiny))
    return torch.stack(out).to(scores.dtype)
