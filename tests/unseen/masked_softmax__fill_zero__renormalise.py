"""Fills masked scores with 0, re-multiplies by the mask and renormalises with a tiny epsilon."""
import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    B, Tq, Tk = scores.shape
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
    mask = (torch.arange(Tk, device=scores.device)[None, None, :] < lens[..., None]).to(scores.dtype)
    w = torch.softmax(scores * mask, dim=-1) * mask
    return w / (w.sum(-1, keepdim=True) + 1e-13)
