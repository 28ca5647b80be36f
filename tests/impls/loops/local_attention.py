import math

import torch
from torch import nn


class LocalAttention(nn.Module):
    """Luong et al. (2015) local attention, written as an explicit loop.

    For every batch row ``b`` and target position ``t`` the window of allowed
    source positions is found, the keys inside it are sliced out as
    ``keys[b, s0:s1]`` and the "general" score / softmax / Gaussian are
    computed on that slice only.
    """

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if mode not in ("local-m", "local-p"):
            raise ValueError(f"mode must be 'local-m' or 'local-p', got {mode!r}")
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if align_dim is None or type(align_dim) is not int:
                raise ValueError("mode 'local-p' needs align_dim")
            self.align_dim = align_dim
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)
        else:
            self.align_dim = None

    @staticmethod
    def _row_length(lens, b, t, default):
        if lens is None:
            return default
        entry = lens[b]
        if isinstance(entry, list):
            return int(entry[t])
        return int(entry)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        D = self.window
        dtype, device = queries.dtype, queries.device
        two_sigma_sq = 2.0 * (D / 2.0) ** 2

        W_a = self.W_a.weight.to(queries)
        if self.mode == "local-p":
            W_p = self.W_p.weight.to(queries)
            v_p = self.v_p.weight.to(queries)

        lens = None
        if valid_lens is not None:
            if valid_lens.dim() not in (1, 2):
                raise ValueError("valid_lens must have shape (B,) or (B, Tq)")
            lens = valid_lens.detach().cpu().tolist()

        if B == 0 or Tq == 0:
            weights = queries.new_zeros(B, Tq, Tk)
            return torch.bmm(weights, values), weights

        batch_rows = []
        for b in range(B):
            rows = []
            for t in range(Tq):
                L = self._row_length(lens, b, t, Tk)
                h_t = queries[b, t]
                if self.mode == "local-m":
                    p_t = torch.tensor(float(t), dtype=dtype, device=device)
                else:
                    z = v_p @ torch.tanh(W_p @ h_t)  # shape (1,)
                    p_t = (L - 1) * torch.sigmoid(z[0])

                # candidate source positions around p_t, then the exact test
                centre = int(math.floor(p_t.item()))
                lo = max(0, centre - D - 1)
                hi = min(L, Tk, centre + D + 2)
                row = queries.new_zeros(Tk)
                if hi > lo:
                    cand = torch.arange(lo, hi, dtype=dtype, device=device)
                    inside = (cand - p_t.detach()).abs() <= D
                    idx = torch.nonzero(inside).flatten()
                    if idx.numel() > 0:
                        s0 = lo + int(idx[0])
                        s1 = lo + int(idx[-1]) + 1
                        k_win = keys[b, s0:s1]                 # (n, dk)
                        scores = (k_win @ W_a.t()) @ h_t        # (n,)
                        a = torch.softmax(scores, dim=0)
                        if self.mode == "local-p":
                            s_pos = torch.arange(s0, s1, dtype=dtype, device=device)
                            a = a * torch.exp(-((s_pos - p_t) ** 2) / two_sigma_sq)
                        row = torch.cat([queries.new_zeros(s0), a, queries.new_zeros(Tk - s1)])
                rows.append(row)
            batch_rows.append(torch.stack(rows))
        weights = torch.stack(batch_rows)
        output = torch.bmm(weights, values)
        return output, weights
