"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: Rows with no allowed key (L = 0, or local-m with t - D >= L) go through a softmax of all -inf and come out NaN instead of weights 0 and output 0.
"""
import torch
from torch import nn


class LocalAttention(nn.Module):
    """Compact masked_fill(-inf) + softmax implementation."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be 'local-m' or 'local-p'")
        if mode == "local-p" and align_dim is None:
            raise ValueError("local-p requires align_dim")
        self.window, self.mode = window, mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        kw = {"dtype": queries.dtype, "device": queries.device}
        if valid_lens is None:
            valid_lens = torch.full((B,), Tk, device=queries.device)
        lens = valid_lens.to(queries.device)
        lens = lens.view(B, 1).expand(B, Tq) if lens.dim() == 1 else lens

        q = queries
        k = keys @ self.W_a.weight.to(**kw).t()
        scores = q @ k.transpose(1, 2)

        if self.mode == "local-m":
            pt = torch.arange(Tq, **kw).view(1, Tq).expand(B, Tq)
        else:
            Wp, vp = self.W_p.weight.to(**kw), self.v_p.weight.to(**kw)
            pt = (lens.to(queries.dtype) - 1) * torch.sigmoid(torch.tanh(q @ Wp.t()) @ vp.t()).squeeze(-1)

        s = torch.arange(Tk, **kw).view(1, 1, Tk)
        off = s - pt.unsqueeze(-1)
        mask = (off.detach().abs() <= self.window) & (s < lens.unsqueeze(-1))
        attn = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        if self.mode == "local-p":
            attn = attn * torch.exp(-off.pow(2) / (self.window ** 2 / 2))
        return attn @ values, attn
