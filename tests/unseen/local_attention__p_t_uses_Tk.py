"""BUG: p_t = (Tk - 1) * sigmoid(...) instead of (L - 1)
STYLE: vectorised
"""
"""Luong et al. (2015) local attention, one target position at a time."""
import torch
import torch.nn as nn


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if mode not in ("local-m", "local-p"):
            raise ValueError(f"mode must be 'local-m' or 'local-p', got {mode!r}")
        self.D, self.mode = window, mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if align_dim is None:
                raise ValueError("local-p needs align_dim")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        Wk = self.W_a(keys)                                         # (B, Tk, dq)
        src = torch.arange(Tk, device=queries.device, dtype=queries.dtype)
        sigma = self.D / 2
        rows = []
        for t in range(Tq):
            h_t = queries[:, t]                                     # (B, dq)
            if valid_lens is None:
                L = torch.full((B,), Tk, device=queries.device, dtype=queries.dtype)
            elif valid_lens.dim() == 1:
                L = valid_lens.to(queries.dtype)
            else:
                L = valid_lens[:, t].to(queries.dtype)
            if self.mode == "local-m":
                p_t = torch.full((B,), float(t), device=queries.device, dtype=queries.dtype)
            else:
                p_t = (Tk - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(h_t)))).squeeze(-1)
            in_window = ((src[None, :] - p_t[:, None]).abs() <= self.D) & (src[None, :] < L[:, None])
            score = torch.einsum("bd,bsd->bs", h_t, Wk)
            score = score.masked_fill(~in_window, torch.finfo(score.dtype).min)
            a = torch.softmax(score, dim=-1) * in_window
            if self.mode == "local-p":
                a = a * torch.exp(-((src[None, :] - p_t[:, None]) ** 2) / (2 * sigma ** 2))
            rows.append(a)
        weights = torch.stack(rows, dim=1)
        return torch.bmm(weights, values), weights
