import torch
from torch import nn
import torch.nn.functional as F


class LocalAttention(nn.Module):
    """Local attention (Luong 2015, sec. 3.2) with einsum scores and a
    torch.where window mask over the full (B, Tq, Tk) score grid."""

    MODES = ("local-m", "local-p")

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError("window (D) must be an integer >= 1")
        if mode not in self.MODES:
            raise ValueError("unknown mode %r: expected 'local-m' or 'local-p'" % (mode,))
        if mode == "local-p" and (align_dim is None or isinstance(align_dim, bool) or not isinstance(align_dim, int)):
            raise ValueError("'local-p' requires align_dim")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def _lengths(self, valid_lens, B, Tq, Tk, device):
        if valid_lens is None:
            return torch.full((B, Tq), Tk, dtype=torch.long, device=device)
        vl = valid_lens.to(device=device, dtype=torch.long)
        if vl.dim() == 1:
            return vl.unsqueeze(1).expand(B, Tq)
        if vl.dim() == 2:
            return vl
        raise ValueError("valid_lens must be (B,) or (B, Tq)")

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        dt, dev = queries.dtype, queries.device
        D = self.window

        proj_keys = F.linear(keys, self.W_a.weight.to(dtype=dt, device=dev))  # (B, Tk, dq)
        scores = torch.einsum("bqd,bkd->bqk", queries, proj_keys)

        lengths = self._lengths(valid_lens, B, Tq, Tk, dev)                   # (B, Tq)
        if self.mode == "local-m":
            p = torch.arange(Tq, dtype=dt, device=dev).unsqueeze(0).expand(B, Tq)
        else:
            hidden = torch.tanh(F.linear(queries, self.W_p.weight.to(dtype=dt, device=dev)))
            logit = F.linear(hidden, self.v_p.weight.to(dtype=dt, device=dev)).squeeze(-1)
            p = (lengths.to(dt) - 1) * torch.sigmoid(logit)

        src = torch.arange(Tk, device=dev)
        offset = src.to(dt).view(1, 1, Tk) - p.unsqueeze(-1)                  # s - p_t
        allowed = (offset.detach().abs() <= D) & (src.view(1, 1, Tk) < lengths.unsqueeze(-1))

        very_negative = torch.finfo(dt).min
        masked = torch.where(allowed, scores, torch.full_like(scores, very_negative))
        a = torch.softmax(masked, dim=-1)
        a = torch.where(allowed, a, torch.zeros_like(a))

        if self.mode == "local-p":
            sigma = D / 2.0
            a = a * torch.exp(-offset.pow(2) / (2.0 * sigma * sigma))

        output = torch.einsum("bqk,bkv->bqv", a, values)
        return output, a
