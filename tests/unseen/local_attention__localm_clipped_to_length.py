"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: In local-m the aligned position is clipped to min(t, L-1), so queries past the source end still attend to the last keys instead of getting an empty window (weights 0) when t - D >= L.
"""
import torch
from torch import nn
import torch.nn.functional as F


def _lin(layer, x):
    """Apply a bias-free nn.Linear in the dtype/device of x."""
    return nn.functional.linear(x, layer.weight.to(x))


class LocalAttention(nn.Module):
    """Gathers 2D+1 keys around floor(p_t) per query."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be 'local-m' or 'local-p'")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if align_dim is None:
                raise ValueError("align_dim required for local-p")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        D = self.window
        dev, dt = queries.device, queries.dtype
        if Tk == 0 or Tq == 0 or B == 0:
            w = queries.new_zeros(B, Tq, Tk)
            return w @ values, w

        if valid_lens is None:
            L = torch.full((B, Tq), Tk, device=dev, dtype=torch.long)
        else:
            L = valid_lens.to(dev).long()
            if L.dim() == 1:
                L = L.unsqueeze(1).expand(B, Tq)

        if self.mode == "local-m":
            # monotonic alignment p_t = t, kept inside the source sentence
            t = torch.arange(Tq, device=dev, dtype=dt).expand(B, Tq)
            p = torch.minimum(t, (L - 1).to(dt))
        else:
            z = _lin(self.v_p, torch.tanh(_lin(self.W_p, queries))).squeeze(-1)
            p = (L.to(dt) - 1) * torch.sigmoid(z)

        base = p.detach().floor().long().unsqueeze(-1)                # (B, Tq, 1)
        idx = base + torch.arange(-D, D + 1, device=dev)              # (B, Tq, 2D+1)
        rel = idx.to(dt) - p.unsqueeze(-1)
        ok = (idx >= 0) & (idx < Tk) & (idx < L.unsqueeze(-1)) & (rel.detach().abs() <= D)
        idx_c = idx.clamp(0, Tk - 1)

        sc = torch.bmm(queries, _lin(self.W_a, keys).transpose(1, 2))       # (B, Tq, Tk)
        win = sc.gather(2, idx_c).masked_fill(~ok, torch.finfo(dt).min)
        a = F.softmax(win, dim=-1) * ok
        if self.mode == "local-p":
            a = a * torch.exp(-rel ** 2 / (2 * (D / 2) ** 2))
        weights = torch.zeros_like(sc).scatter_add(2, idx_c, a)
        return weights @ values, weights
