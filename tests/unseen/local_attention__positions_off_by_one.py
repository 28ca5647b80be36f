"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: Source positions are taken 1-based (s+1) in the window test and the Gaussian distance, shifting the window one step left of p_t.
"""
import torch
from torch import nn
import torch.nn.functional as F


class LocalAttention(nn.Module):
    """Log-domain implementation: the window is an additive log-mask and the
    softmax is computed as exp(score - logsumexp)."""

    def __init__(self, query_dim, key_dim, window, mode="local-p", align_dim=None):
        super().__init__()
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError("window must be a positive int")
        if mode not in ("local-m", "local-p"):
            raise ValueError("mode: expected 'local-m' or 'local-p'")
        if mode == "local-p" and align_dim is None:
            raise ValueError("align_dim is required when mode='local-p'")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        opts = dict(dtype=queries.dtype, device=queries.device)
        D = self.window

        if valid_lens is None:
            L = torch.full((B, Tq), float(Tk), **opts)
        else:
            L = valid_lens.to(**opts)
            if L.dim() == 1:
                L = L[:, None].expand(B, Tq)

        score = queries @ F.linear(keys, self.W_a.weight.to(**opts)).transpose(1, 2)

        if self.mode == "local-m":
            p_t = torch.arange(Tq, **opts).expand(B, Tq)
        else:
            x = torch.tanh(F.linear(queries, self.W_p.weight.to(**opts)))
            p_t = (L - 1) * torch.sigmoid(F.linear(x, self.v_p.weight.to(**opts)))[..., 0]

        idx = torch.arange(Tk, **opts)                 # padding test uses 0-based index
        pos = torch.arange(1, Tk + 1, **opts)          # source positions s
        dist = pos[None, None, :] - p_t[..., None]
        allowed = (idx[None, None, :] < L[..., None]) & (dist.detach().abs() <= D)

        log_mask = torch.zeros_like(score).masked_fill(~allowed, float("-inf"))
        logits = score + log_mask
        any_ok = allowed.any(-1, keepdim=True)
        logits = torch.where(any_ok, logits, torch.zeros_like(logits))
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        a = torch.exp(logits - lse) * allowed

        if self.mode == "local-p":
            sigma = D / 2.0
            a = a * torch.exp(-(dist ** 2) / (2 * sigma ** 2))
        return torch.bmm(a, values), a
