"""Correct, with functools and dataclasses imported at module level."""
import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class _Fill:
    dtype: torch.dtype

    @functools.cached_property
    def value(self):
        return torch.finfo(self.dtype).min


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1], device=scores.device) < lens[..., None]
    return torch.softmax(scores.masked_fill(~keep, _Fill(scores.dtype).value), dim=-1) * keep
