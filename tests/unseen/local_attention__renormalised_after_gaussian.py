"""STYLE: written from the contract alone (CONTRACT-next.md section 14), never from the kit's reference
BUG: After multiplying by the Gaussian the local-p weights are renormalised to sum to 1, which the contract forbids.
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
        if mode == "local-p" and align_dim is None:
            raise ValueError("local-p requires align_dim")
        self.window = window
        self.mode = mode
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)
        if mode == "local-p":
            self.W_p = nn.Linear(query_dim, align_dim, bias=False)
            self.v_p = nn.Linear(align_dim, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, dq = queries.shape
        Tk = keys.shape[1]
        dt, dev = queries.dtype, queries.device

        Wa = self.W_a.weight.to(queries)                         # (dq, dk)
        scores = torch.einsum("btq,qk,bsk->bts", queries, Wa, keys)

        if valid_lens is None:
            L = torch.full((B, Tq), Tk, device=dev, dtype=torch.long)
        elif valid_lens.dim() == 1:
            L = valid_lens.to(dev).long()[:, None].expand(B, Tq)
        else:
            L = valid_lens.to(dev).long()

        if self.mode == "local-p":
            Wp = self.W_p.weight.to(queries)
            vp = self.v_p.weight.to(queries)
            logits = torch.einsum("bta,oa->bto", torch.tanh(torch.einsum("btq,aq->bta", queries, Wp)), vp)
            p = (L.to(dt) - 1) * torch.sigmoid(logits[..., 0])
        else:
            p = torch.arange(Tq, dtype=dt, device=dev).expand(B, Tq)

        pos = torch.arange(Tk, dtype=dt, device=dev)
        diff = pos.view(1, 1, Tk) - p.unsqueeze(-1)
        allowed = (diff.detach().abs() <= self.window) & (torch.arange(Tk, device=dev).view(1, 1, Tk) < L.unsqueeze(-1))

        a = torch.softmax(torch.where(allowed, scores, torch.full_like(scores, -1e30)), dim=-1)
        a = torch.where(allowed, a, torch.zeros_like(a))
        if self.mode == "local-p":
            sigma = self.window / 2.0
            a = a * torch.exp(-diff * diff / (2.0 * sigma * sigma))
            # keep each row a probability distribution
            total = a.sum(-1, keepdim=True)
            a = a / torch.where(total > 0, total, torch.ones_like(total))

        out = torch.einsum("bts,bsv->btv", a, values)
        return out, a
