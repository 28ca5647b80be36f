"""BUG: none
STYLE: CORRECT (vectorised; boolean window mask + masked_fill, course-solution style)
"""
import math
import torch
from torch import nn


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if not _is_int(window) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if mode not in ("local-m", "local-p"):
            raise ValueError(f"mode must be 'local-m' or 'local-p', got {mode!r}")
        if mode == "local-p" and (not _is_int(align_dim) or align_dim < 1):
            raise ValueError(f"local-p needs an int align_dim >= 1, got {align_dim!r}")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dev = queries.device
        D = self.window
        if valid_lens is None:
            L = torch.full((B, Tq), Tk, device=dev)
        elif valid_lens.dim() == 1:
            L = valid_lens[:, None].expand(B, Tq)
        else:
            L = valid_lens
        Lf = L.to(queries.dtype)
        s = torch.arange(Tk, device=dev).to(queries.dtype)
        if self.mode == "local-m":
            p = torch.arange(Tq, device=dev).to(queries.dtype)[None, :].expand(B, Tq)
        else:
            p = (Lf - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries))).squeeze(-1))
        dist = s[None, None, :] - p[..., None]                       # (B, Tq, Tk)
        allowed = (s[None, None, :] < Lf[..., None]) & (dist.abs() <= D)
        scores = torch.bmm(queries, self.W_a(keys).transpose(1, 2))  # (B, Tq, Tk)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        a = torch.softmax(scores, dim=-1) * allowed
        if self.mode == "local-p":
            sigma = D / 2
            a = a * torch.exp(-dist.pow(2) / (2 * sigma ** 2))
        return torch.bmm(a, values), a
