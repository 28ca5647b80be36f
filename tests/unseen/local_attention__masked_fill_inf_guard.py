"""STYLE: masked fill inf guard (written from the contract alone, not from the kit's reference)
BUG: none
"""
import torch
from torch import nn


class LocalAttention(nn.Module):
    """Everything is computed on the (B, Tq, Tk) grid with broadcasting;
    disallowed keys get -inf via masked_fill.  Rows with no allowed key are
    given a neutral (all-zero) score row before the softmax so that neither
    the forward nor the backward pass sees NaN, and are zeroed afterwards."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if type(window) is not int or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        if mode == "local-p":
            if type(align_dim) is not int:  # None, a bool or a float: no size
                raise ValueError("local-p attention requires align_dim")
        elif mode != "local-m":
            raise ValueError(f"mode must be one of 'local-m', 'local-p' (got {mode!r})")
        self.D = window
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        like = dict(dtype=queries.dtype, device=queries.device)

        # per-(b, t) valid length, shape (B, Tq, 1)
        if valid_lens is None:
            L = torch.full((B, Tq, 1), Tk, dtype=torch.long, device=queries.device)
        elif valid_lens.dim() == 1:
            L = valid_lens.to(queries.device).long().reshape(B, 1, 1).expand(B, Tq, 1)
        else:
            L = valid_lens.to(queries.device).long().reshape(B, Tq, 1)

        Wa = self.W_a.weight.to(**like)                       # (dq, dk)
        scores = queries @ (keys @ Wa.transpose(0, 1)).transpose(1, 2)  # (B, Tq, Tk)

        if self.mode == "local-m":
            p_t = torch.arange(Tq, **like).reshape(1, Tq, 1)
        else:
            Wp = self.W_p.weight.to(**like)
            vp = self.v_p.weight.to(**like)
            gate = torch.sigmoid(torch.tanh(queries @ Wp.t()) @ vp.t())  # (B, Tq, 1)
            p_t = (L.to(queries.dtype) - 1.0) * gate

        s = torch.arange(Tk, **like).reshape(1, 1, Tk)
        s_idx = torch.arange(Tk, device=queries.device).reshape(1, 1, Tk)
        delta = s - p_t                                        # broadcast -> (B, Tq, Tk)
        in_window = delta.detach().abs() <= self.D
        keep = in_window & (s_idx < L)
        keep = keep.expand(B, Tq, Tk)

        empty_row = ~keep.any(dim=-1, keepdim=True)
        filled = scores.masked_fill(~keep, float("-inf"))
        filled = filled.masked_fill(empty_row, 0.0)
        attn = torch.softmax(filled, dim=-1).masked_fill(~keep, 0.0)
        attn = torch.nan_to_num(attn, nan=0.0)

        if self.mode == "local-p":
            sigma = self.D / 2
            attn = attn * torch.exp(-(delta ** 2) / (2 * sigma ** 2))

        return attn @ values, attn
