"""STYLE: gather window (written from the contract alone, not from the kit's reference)
BUG: none
"""
import torch
from torch import nn
import torch.nn.functional as F


class LocalAttention(nn.Module):
    """Local attention that works on a gathered window of 2D+1 candidate
    source positions per query (floor(p_t)-D .. floor(p_t)+D, which always
    contains every s with |s - p_t| <= D), runs the softmax on that small
    window and scatters the result back into a dense (B, Tq, Tk) tensor."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int):
            raise ValueError("window must be an int")
        if window < 1:
            raise ValueError("window must be >= 1")
        if mode not in {"local-m", "local-p"}:
            raise ValueError("mode must be 'local-m' or 'local-p'")
        self.window, self.mode = window, mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if align_dim is None or isinstance(align_dim, bool) or not isinstance(align_dim, int):
                raise ValueError("align_dim is required for 'local-p'")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, dq = queries.shape
        Tk = keys.shape[1]
        D = self.window
        dtype, device = queries.dtype, queries.device

        if Tk == 0 or Tq == 0 or B == 0:
            weights = queries.new_zeros(B, Tq, Tk)
            return weights @ values, weights

        if valid_lens is None:
            L = torch.full((B, Tq), Tk, device=device, dtype=torch.long)
        else:
            L = valid_lens.to(device=device, dtype=torch.long)
            L = L[:, None].expand(B, Tq) if L.dim() == 1 else L

        if self.mode == "local-m":
            p = torch.arange(Tq, device=device, dtype=dtype).expand(B, Tq)
        else:
            u = torch.tanh(F.linear(queries, self.W_p.weight.to(queries)))
            p = (L.to(dtype) - 1) * torch.sigmoid(F.linear(u, self.v_p.weight.to(queries)))[..., 0]

        # candidate positions, (B, Tq, 2D+1)
        centre = torch.floor(p.detach()).long()
        offsets = torch.arange(-D, D + 1, device=device)
        cand = centre[..., None] + offsets
        valid = (cand >= 0) & (cand < L[..., None]) & (cand < Tk)
        rel = cand.to(dtype) - p[..., None]
        valid = valid & (rel.detach().abs() <= D)
        safe_idx = cand.clamp(0, Tk - 1)

        # gather projected keys for every window slot: (B, Tq, 2D+1, dq)
        proj = F.linear(keys, self.W_a.weight.to(keys))              # (B, Tk, dq)
        batch_ix = torch.arange(B, device=device)[:, None, None]
        k_win = proj[batch_ix, safe_idx]
        win_scores = torch.einsum("btwd,btd->btw", k_win, queries)

        fill = torch.finfo(dtype).min
        win_scores = win_scores.masked_fill(~valid, fill)
        a = F.softmax(win_scores, dim=-1) * valid.to(dtype)

        if self.mode == "local-p":
            sigma = D / 2
            a = a * torch.exp(-rel.pow(2) / (2 * sigma ** 2))

        weights = queries.new_zeros(B, Tq, Tk).scatter_add(2, safe_idx, a)
        output = torch.bmm(weights, values)
        return output, weights
