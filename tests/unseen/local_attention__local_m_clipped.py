"""BUG: local-m's p_t clipped to L - 1
STYLE: vectorised
"""
import math

import torch
from torch import nn


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if type(window) is not int or window < 1:
            raise ValueError("window (D) must be a positive int")
        if mode == "local-p":
            if align_dim is None:
                raise ValueError("align_dim is required for mode='local-p'")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)
        elif mode != "local-m":
            raise ValueError("mode must be one of 'local-m', 'local-p'")
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        self.window, self.mode = window, mode

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dev, dt = queries.device, queries.dtype
        if valid_lens is None:
            L = torch.full((B, Tq), Tk, device=dev)
        else:
            L = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
        L = L.to(dt)[..., None]                                          # (B, Tq, 1)
        if self.mode == "local-m":
            p = torch.minimum(torch.arange(Tq, device=dev, dtype=dt).view(1, Tq, 1), L - 1)
        else:
            p = (L - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries))))   # (B, Tq, 1)
        s = torch.arange(Tk, device=dev, dtype=dt).view(1, 1, Tk)
        allowed = (s < L) & ((s - p).abs() <= self.window)               # (B, Tq, Tk)
        scores = queries @ self.W_a(keys).transpose(1, 2)
        scores = torch.where(allowed, scores, -math.inf)
        m = scores.amax(-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, 0.0).detach()
        e = torch.exp(scores - m)
        z = e.sum(-1, keepdim=True)
        weights = e / torch.where(z > 0, z, 1.0)
        if self.mode == "local-p":
            sigma = self.window / 2.0
            weights = weights * torch.exp(-(s - p).square() / (2.0 * sigma * sigma))
        return weights @ values, weights
