"""Lengths that are not int64 are cast to int8 (wrong past 127).
BUG: lengths that are not int64 are cast to int8 (wrong past 127)."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    Tk = scores.shape[-1]
    vl = valid_lens if valid_lens.dtype == torch.int64 else valid_lens.to(torch.int8)
    if vl.dim() == 1:
        vl = vl[:, None]
    allowed = torch.arange(Tk, device=scores.device)[None, None, :] < vl[..., None]
    s = scores.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))
