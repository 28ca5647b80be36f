"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: The window test is |s - p_t| < D (strict) instead of <= D, dropping the edge positions (e.g. s = t +- D in local-m).
"""
import torch
from torch import nn


def _lin(layer, x):
    """Apply a bias-free nn.Linear in the dtype/device of x."""
    return nn.functional.linear(x, layer.weight.to(x))


class LocalAttention(nn.Module):
    """Broadcasting implementation with an explicit window mask."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if type(window) is not int or window < 1:
            raise ValueError("window must be a positive integer")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be either 'local-m' or 'local-p'")
        if mode == "local-p" and align_dim is None:
            raise ValueError("local-p requires align_dim")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        f = dict(dtype=queries.dtype, device=queries.device)

        if valid_lens is None:
            L = torch.tensor(Tk, device=queries.device).expand(B, Tq)
        elif valid_lens.ndim == 1:
            L = valid_lens.to(queries.device)[:, None].expand(B, Tq)
        else:
            L = valid_lens.to(queries.device)

        if self.mode == "local-m":
            p = torch.arange(Tq, **f)[None, :].expand(B, Tq)
        else:
            p = (L.to(queries.dtype) - 1) * torch.sigmoid(_lin(self.v_p, torch.tanh(_lin(self.W_p, queries)))[..., 0])

        s = torch.arange(Tk, **f)
        d = s[None, None, :] - p[..., None]                       # (B, Tq, Tk)
        in_len = torch.arange(Tk, device=queries.device)[None, None, :] < L[..., None]
        in_win = d.detach().abs() < self.window
        allowed = in_win & in_len

        scores = queries @ _lin(self.W_a, keys).transpose(-1, -2)
        has_any = allowed.any(-1, keepdim=True)
        scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~has_any, 0.0)
        a = scores.softmax(-1).masked_fill(~allowed, 0.0)
        if self.mode == "local-p":
            a = a * torch.exp(-2.0 * d ** 2 / self.window ** 2)   # sigma = D/2
        return a @ values, a
