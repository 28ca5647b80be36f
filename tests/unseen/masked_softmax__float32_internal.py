"""BUG: everything is computed in float32 "for speed" and cast back, so float64 inputs lose precision (results only good to ~1e-7).
STAGE: the softmax
"""
import torch


def masked_softmax(scores, valid_lens=None):
    x = scores.float()
    if valid_lens is not None:
        B, Tq, Tk = x.shape
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
        mask = torch.arange(Tk, device=x.device)[None, None, :] < lens[..., None]
        x = x.masked_fill(~mask, -1e9)
        w = torch.softmax(x, dim=-1) * mask.float()
    else:
        w = torch.softmax(x, dim=-1)
    return w.to(scores.dtype)
