"""BUG: none
STYLE: vectorised Luong (2015) local attention as in OpenNMT-style ports: window built with torch.where over a (B, Tq, Tk) position grid, Gaussian applied after the masked softmax.
"""
import torch
from torch import nn


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if mode not in ("local-m", "local-p"):
            raise ValueError(f"mode must be 'local-m' or 'local-p', got {mode!r}")
        self.window, self.mode = window, mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if isinstance(align_dim, bool) or not isinstance(align_dim, int) or align_dim < 1:
                raise ValueError("local-p needs an int align_dim >= 1")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dt, dev = queries.dtype, queries.device
        scores = torch.bmm(queries, self.W_a(keys).transpose(1, 2))              # (B, Tq, Tk)
        if valid_lens is None:
            L = torch.full((B, Tq, 1), Tk, dtype=dt, device=dev)
        elif valid_lens.dim() == 1:
            L = valid_lens.to(dt)[:, None, None].expand(B, Tq, 1)
        else:
            L = valid_lens.to(dt)[:, :, None]
        s = torch.arange(Tk, device=dev, dtype=dt).view(1, 1, Tk)
        if self.mode == "local-m":
            p = torch.arange(Tq, device=dev, dtype=dt).view(1, Tq, 1)
        else:
            p = (L - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries))))  # (B, Tq, 1)
        D = self.window
        allowed = (s < L) & ((s - p).abs() <= D)
        live = allowed.any(dim=-1, keepdim=True)
        zero = torch.zeros((), dtype=dt, device=dev)
        masked = torch.where(allowed, scores, torch.tensor(float("-inf"), dtype=dt, device=dev))
        masked = torch.where(live, masked, zero)
        a = torch.where(live, torch.softmax(masked, dim=-1), zero)
        if self.mode == "local-p":
            sigma = D / 2.0
            a = a * torch.exp(-((s - p) ** 2) / (2 * sigma ** 2))
        return torch.bmm(a, values), a
