"""Local-m given align_dim creates W_p/v_p anyway.
BUG: local-m given align_dim creates W_p/v_p anyway."""
import torch
from torch import nn


def _msoftmax(s, allowed):
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be local-m or local-p")
        if mode == "local-p" and align_dim is None:
            raise ValueError("local-p needs align_dim")
        self.window, self.mode = window, mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if align_dim is not None:
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dt, dev = queries.dtype, queries.device
        if valid_lens is None:
            L = torch.full((B, Tq), Tk, device=dev)
        elif valid_lens.dim() == 1:
            L = valid_lens[:, None].expand(B, Tq)
        else:
            L = valid_lens
        L = L.to(dt)
        if self.mode == "local-m":
            p = torch.arange(Tq, device=dev, dtype=dt)[None, :].expand(B, Tq)
        else:
            p = (L - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries)))).squeeze(-1)
        s_idx = torch.arange(Tk, device=dev, dtype=dt)
        allowed = (s_idx < L[..., None]) & ((s_idx - p[..., None]).abs() <= self.window)
        scores = queries @ self.W_a(keys).transpose(1, 2)
        a = _msoftmax(scores, allowed)
        if self.mode == "local-p":
            sigma = self.window / 2
            w = a * torch.exp(-((s_idx - p[..., None]) ** 2) / (2 * sigma ** 2))
        else:
            w = a
        return w @ values, w
