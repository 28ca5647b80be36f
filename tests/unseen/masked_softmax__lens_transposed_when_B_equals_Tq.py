"""(B,Tq) valid_lens transposed when B == Tq.
BUG: (B,Tq) valid_lens transposed when B == Tq."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    Tk = scores.shape[-1]
    vl = valid_lens
    if vl.dim() == 1:
        vl = vl[:, None]
    elif vl.shape[0] == vl.shape[1]:
        vl = vl.T
    allowed = torch.arange(Tk, device=scores.device)[None, None, :] < vl[..., None]
    s = scores.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))
