"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: The softmax is taken over all valid keys and the result is then zeroed outside the window without renormalising, instead of a softmax over the window's keys only.
"""
import torch
from torch import nn
import torch.nn.functional as F


class LocalAttention(nn.Module):
    """Scores -> masked softmax (written with exp/sum) -> window -> Gaussian."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError("window must be an integer >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be 'local-m' or 'local-p'")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if align_dim is None:
                raise ValueError("local-p requires align_dim")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dt, dev = queries.dtype, queries.device

        if valid_lens is None:
            lens = torch.full((B, Tq), Tk, dtype=torch.long, device=dev)
        else:
            lens = valid_lens.to(dev).long()
            if lens.dim() == 1:
                lens = lens.unsqueeze(-1).expand(B, Tq)

        e = torch.matmul(queries, F.linear(keys, self.W_a.weight.to(keys)).transpose(-1, -2))

        key_ok = torch.arange(Tk, device=dev).view(1, 1, Tk) < lens.unsqueeze(-1)
        if self.mode == "local-m":
            p = torch.arange(Tq, dtype=dt, device=dev).view(1, Tq).expand(B, Tq)
        else:
            hid = torch.tanh(F.linear(queries, self.W_p.weight.to(queries)))
            p = (lens.to(dt) - 1) * torch.sigmoid(F.linear(hid, self.v_p.weight.to(queries)).squeeze(-1))
        delta = torch.arange(Tk, dtype=dt, device=dev).view(1, 1, Tk) - p.unsqueeze(-1)
        in_win = delta.detach().abs() <= self.window

        # softmax over the valid (unpadded) keys
        m = e.masked_fill(~key_ok, torch.finfo(dt).min).amax(-1, keepdim=True).detach()
        ex = torch.exp((e - m).masked_fill(~key_ok, float("-inf")))
        z = ex.sum(-1, keepdim=True)
        a = ex / torch.where(z > 0, z, torch.ones_like(z))
        # then keep only the local window
        a = a * in_win.to(dt)

        if self.mode == "local-p":
            s2 = (self.window / 2) ** 2
            a = a * torch.exp(-delta ** 2 / (2 * s2))
        return a @ values, a
