"""Reference: Luong's local attention (local-m and local-p) with the general score."""
import torch
from torch import nn


class LocalAttention(nn.Module):
    """Softmax of the general scores over the 2D+1 keys around p_t; local-p then weighs them by a Gaussian."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        modes = ("local-m", "local-p")
        if mode not in modes:
            raise ValueError(f"mode must be one of {', '.join(modes)}; got {mode!r}")
        if type(window) is not int or window < 1:
            raise ValueError(f"window must be an int >= 1; got {window!r}")
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if type(align_dim) is not int or align_dim < 1:
                raise ValueError(f"local-p needs align_dim, an int >= 1; got {align_dim!r}")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)
        self.window, self.mode = window, mode

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, Tk = queries.shape[0], queries.shape[1], keys.shape[1]
        scores = queries @ self.W_a(keys).transpose(1, 2)  # (B, Tq, Tk)
        if valid_lens is None:
            lens = torch.full((B, Tq), Tk, device=scores.device)
        elif valid_lens.dim() == 1:
            lens = valid_lens[:, None].expand(B, Tq)
        else:
            lens = valid_lens
        L = lens.to(scores.dtype)[..., None]  # (B, Tq, 1)
        s = torch.arange(Tk, device=scores.device, dtype=scores.dtype)  # (Tk,) key positions
        if self.mode == "local-m":
            p = torch.arange(Tq, device=scores.device, dtype=scores.dtype)[:, None]  # (Tq, 1): p_t = t
        else:
            p = (L - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries))))  # (B, Tq, 1)
        dist = s - p  # (B or 1, Tq, Tk)
        allowed = (s < L) & (dist.detach().abs() <= self.window)  # (B, Tq, Tk)
        filled = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        weights = torch.softmax(filled, dim=-1) * allowed
        if self.mode == "local-p":
            sigma = self.window / 2
            weights = weights * torch.exp(-dist**2 / (2 * sigma**2))
        return torch.bmm(weights, values), weights
