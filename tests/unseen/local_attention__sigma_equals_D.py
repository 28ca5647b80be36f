"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: The local-p Gaussian uses sigma = D instead of sigma = D/2, so the window weights decay too slowly.
"""
import torch
from torch import nn


def _lin(layer, x):
    """Apply a bias-free nn.Linear in the dtype/device of x."""
    return nn.functional.linear(x, layer.weight.to(x))


class LocalAttention(nn.Module):
    """Loops over target positions; each step is vectorised over the batch."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"bad window {window!r}: need an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError(f"bad mode {mode!r}: need 'local-m' or 'local-p'")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if align_dim is None:
                raise ValueError("align_dim is needed for local-p")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        D = self.window
        Wk = _lin(self.W_a, keys)                                  # (B, Tk, dq)
        src = torch.arange(Tk, device=keys.device)
        src_f = src.to(queries.dtype)
        sigma = float(D)                                     # width of the Gaussian

        columns = []
        for t in range(Tq):
            h = queries[:, t, :]                             # (B, dq)
            if valid_lens is None:
                L = torch.full((B,), Tk, device=queries.device)
            elif valid_lens.dim() == 1:
                L = valid_lens.to(queries.device)
            else:
                L = valid_lens[:, t].to(queries.device)

            if self.mode == "local-m":
                p = torch.full((B,), float(t), dtype=queries.dtype, device=queries.device)
            else:
                p = (L.to(queries.dtype) - 1) * torch.sigmoid(_lin(self.v_p, torch.tanh(_lin(self.W_p, h)))).squeeze(-1)

            e = torch.einsum("bd,bkd->bk", h, Wk)            # (B, Tk)
            diff = src_f[None, :] - p[:, None]
            ok = (diff.detach().abs() <= D) & (src[None, :] < L[:, None])
            e = e.masked_fill(~ok, float("-inf"))
            none_ok = ~ok.any(dim=1, keepdim=True)
            e = e.masked_fill(none_ok, 0.0)
            a = torch.softmax(e, dim=1) * ok
            if self.mode == "local-p":
                a = a * torch.exp(-diff.pow(2) / (2 * sigma ** 2))
            columns.append(a)

        if Tq == 0:
            weights = queries.new_zeros(B, 0, Tk)
        else:
            weights = torch.stack(columns, dim=1)
        return torch.bmm(weights, values), weights
