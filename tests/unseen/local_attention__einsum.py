"""BUG: none
STYLE: CORRECT (einsum + torch.where, hand-written numerically safe softmax, HF-style additive position bias for the Gaussian computed in log space then exp'd after)
"""
import math
import torch
from torch import nn


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        ok = isinstance(window, int) and not isinstance(window, bool) and window >= 1
        if not ok:
            raise ValueError("window must be a positive int")
        if mode == "local-p":
            if isinstance(align_dim, bool) or not isinstance(align_dim, int) or align_dim <= 0:
                raise ValueError("align_dim must be a positive int for mode='local-p'")
        elif mode != "local-m":
            raise ValueError("unknown mode %r (expected 'local-m' or 'local-p')" % (mode,))
        self.D = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dt = queries.dtype
        dev = queries.device
        if valid_lens is None:
            L = torch.full((B, 1), Tk, device=dev, dtype=dt)
        else:
            L = valid_lens.to(dt)
            if L.dim() == 1:
                L = L.unsqueeze(1)
        # L broadcasts to (B, Tq)
        if self.mode == "local-m":
            p = torch.arange(Tq, device=dev, dtype=dt).unsqueeze(0)           # (1, Tq)
        else:
            z = torch.einsum("bta,a->bt", torch.tanh(self.W_p(queries)), self.v_p.weight[0])
            p = (L - 1) * torch.sigmoid(z)                                    # (B, Tq)
        s = torch.arange(Tk, device=dev, dtype=dt)
        diff = s.view(1, 1, Tk) - p.unsqueeze(-1)
        allowed = (s.view(1, 1, Tk) < L.unsqueeze(-1)) & (diff.abs() <= self.D)
        allowed = allowed.expand(B, Tq, Tk)
        scores = torch.einsum("btq,bsq->bts", queries, self.W_a(keys))
        neg = torch.full_like(scores, float("-inf"))
        m = torch.where(allowed, scores, neg).amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
        e = torch.where(allowed, torch.exp(torch.where(allowed, scores - m, torch.zeros_like(scores))),
                        torch.zeros_like(scores))
        denom = e.sum(-1, keepdim=True)
        a = e / torch.where(denom > 0, denom, torch.ones_like(denom))
        if self.mode == "local-p":
            sigma = self.D / 2.0
            a = a * torch.exp(-(diff ** 2) / (2.0 * sigma ** 2))
        out = torch.einsum("bts,bsv->btv", a, values)
        return out, a
