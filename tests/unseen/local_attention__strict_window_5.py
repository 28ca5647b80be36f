"""BUG: window test is strict, |s - p_t| < D instead of <= D, so local-m drops the keys t-D and t+D; differs on local-m inputs (integer p_t) whenever t +- D is a valid key.
STAGE: the mask (the window)
STYLE: Keras/TF-port style with a precomputed position grid and masked_fill
"""
import torch
from torch import nn


class LocalAttention(nn.Module):
    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be an int >= 1")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode must be 'local-m' or 'local-p'")
        if mode == "local-p" and (isinstance(align_dim, bool) or not isinstance(align_dim, int)):
            raise ValueError("local-p needs align_dim (int)")
        self.window, self.mode = window, mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        scores = queries @ self.W_a(keys).transpose(-1, -2)
        if valid_lens is None:
            L = queries.new_full((B, Tq, 1), Tk)
        else:
            L = (valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens).to(queries.dtype)
            L = L.expand(B, Tq).unsqueeze(-1)
        pos = torch.arange(Tk, dtype=queries.dtype, device=queries.device)
        if self.mode == "local-m":
            p_t = torch.arange(Tq, dtype=queries.dtype, device=queries.device)[None, :, None]
        else:
            p_t = (L - 1) * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries))))
        ok = (pos < L) & ((pos - p_t).abs() < self.window)
        any_ok = ok.any(-1, keepdim=True)
        scores = scores.masked_fill(~ok, float("-inf")).masked_fill(~any_ok, 0.0)
        a = scores.softmax(-1).masked_fill(~any_ok, 0.0)
        if self.mode == "local-p":
            sigma = self.window / 2
            a = a * torch.exp(-(pos - p_t).pow(2) / (2 * sigma ** 2))
        return a @ values, a
