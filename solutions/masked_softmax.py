"""Reference: masked softmax over the last axis."""
import torch


def masked_softmax(scores, valid_lens=None):
    """scores: (B, Tq, Tk); valid_lens: None, (B,) or (B, Tq) -> weights (B, Tq, Tk)."""
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]  # (B, Tq) or (B, 1)
    keep = torch.arange(scores.shape[-1], device=scores.device) < lens[..., None]  # (B, Tq|1, Tk)
    # A finite fill keeps fully masked rows free of NaN in both passes; `* keep` zeroes them.
    filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1) * keep
