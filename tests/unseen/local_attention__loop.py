"""BUG: none
STYLE: CORRECT (explicit Python loops over batch rows and time steps; slice the window [ceil(p_t - D), floor(p_t + D)] of the keys, as Luong's original description does)
"""
import math
import torch
import torch.nn.functional as F
from torch import nn


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if type(window) is not int or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be one of 'local-m', 'local-p'")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            if type(align_dim) is not int or align_dim < 1:
                raise ValueError("local-p requires an integer align_dim")
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dv = values.shape[-1]
        D = self.window
        Wk = self.W_a(keys)                                   # (B, Tk, dq)
        if self.mode == "local-p":
            gate = torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries))))[..., 0]  # (B, Tq)
        out_rows, w_rows = [], []
        for b in range(B):
            o_b, w_b = [], []
            for t in range(Tq):
                if valid_lens is None:
                    L = Tk
                elif valid_lens.dim() == 1:
                    L = int(valid_lens[b])
                else:
                    L = int(valid_lens[b, t])
                if self.mode == "local-m":
                    p = float(t)
                    p_t = p
                else:
                    p_t = (L - 1) * gate[b, t]
                    p = float(p_t)
                lo = max(0, math.ceil(p - D))
                hi = min(L - 1, math.floor(p + D))
                if hi < lo:
                    w = queries.new_zeros(Tk)
                    w_b.append(w)
                    o_b.append(queries.new_zeros(dv))
                    continue
                sc = Wk[b, lo:hi + 1] @ queries[b, t]          # (n,)
                a = torch.softmax(sc, dim=0)
                if self.mode == "local-p":
                    pos = torch.arange(lo, hi + 1, device=queries.device).to(queries.dtype)
                    sigma = D / 2
                    a = a * torch.exp(-(pos - p_t) ** 2 / (2 * sigma * sigma))
                o_b.append(a @ values[b, lo:hi + 1])
                w_b.append(F.pad(a, (lo, Tk - hi - 1)))
            out_rows.append(torch.stack(o_b))
            w_rows.append(torch.stack(w_b))
        return torch.stack(out_rows), torch.stack(w_rows)
