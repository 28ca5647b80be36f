"""BUG: none
STYLE: literal per-position implementation (as in the paper / blog walkthroughs): for each (b, t) slice the window [ceil(p_t - D), floor(p_t + D)] clipped to [0, L-1], softmax on the slice, Gaussian on the slice, F.pad back to Tk.
"""
import math
import torch
from torch import nn
import torch.nn.functional as F


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if type(window) is not int or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode == "local-p":
            if type(align_dim) is not int or align_dim < 1:
                raise ValueError("local-p requires an integer align_dim")
        elif mode != "local-m":
            raise ValueError("mode must be one of: local-m, local-p")
        self.D = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        Wk = self.W_a(keys)
        if self.mode == "local-p":
            sig = torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries)))).squeeze(-1)   # (B, Tq)
        rows = []
        for b in range(B):
            for t in range(Tq):
                if valid_lens is None:
                    L = Tk
                elif valid_lens.dim() == 1:
                    L = int(valid_lens[b])
                else:
                    L = int(valid_lens[b, t])
                if self.mode == "local-m":
                    p = torch.tensor(float(t), dtype=queries.dtype, device=queries.device)
                else:
                    p = (L - 1) * sig[b, t]
                pv = float(p.detach())
                lo = max(0, math.ceil(pv - self.D))
                hi = min(L - 1, math.floor(pv + self.D))
                if hi < lo:
                    rows.append(queries.new_zeros(Tk))
                    continue
                seg = Wk[b, lo:hi + 1] @ queries[b, t]                     # scores on the window
                a = torch.softmax(seg, dim=0)
                if self.mode == "local-p":
                    pos = torch.arange(lo, hi + 1, dtype=queries.dtype, device=queries.device)
                    sigma = self.D / 2
                    a = a * torch.exp(-(pos - p) ** 2 / (2 * sigma * sigma))
                rows.append(F.pad(a, (lo, Tk - hi - 1)))
        weights = torch.stack(rows).view(B, Tq, Tk)
        return weights @ values, weights
