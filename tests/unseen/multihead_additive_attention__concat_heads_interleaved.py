"""BUG: stack(dim=-1).reshape interleaves the heads
STYLE: stack
"""
"""Multi-head additive attention with a per-head loop.

BUG: the head contexts are combined with torch.stack(..., dim=-1).reshape(B, Tq, H*dv), which
interleaves features (dv-major, head-minor) instead of concatenating heads in order, so W_o sees
the wrong layout. Invisible with one head or dv = 1.
"""
import torch
import torch.nn as nn


class MultiHeadAdditiveAttention(nn.Module):
    def __init__(self, num_heads, query_dim, key_dim, value_dim, attn_dim, dropout=0.0):
        super().__init__()
        self.num_heads, self.attn_dim = num_heads, attn_dim
        self.W_q = nn.Linear(query_dim, num_heads * attn_dim, bias=False)
        self.W_k = nn.Linear(key_dim, num_heads * attn_dim, bias=False)
        self.w_v = nn.Parameter(torch.randn(num_heads, attn_dim) * attn_dim ** -0.5)
        self.W_o = nn.Linear(num_heads * value_dim, value_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        qp, kp = self.W_q(queries), self.W_k(keys)
        if valid_lens is None:
            mask = torch.ones(B, Tq, Tk, dtype=torch.bool, device=queries.device)
        else:
            vl = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(1).expand(B, Tq)
            mask = torch.arange(Tk, device=queries.device).view(1, 1, Tk) < vl.unsqueeze(-1)
        ctxs, ws = [], []
        for n in range(self.num_heads):
            sl = slice(n * self.attn_dim, (n + 1) * self.attn_dim)
            s = torch.tanh(qp[..., None, sl] + kp[:, None, :, sl]) @ self.w_v[n]
            s = torch.where(mask, s, torch.full_like(s, float("-inf")))
            m = s.amax(-1, keepdim=True).detach()
            m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
            p = torch.where(mask, torch.exp(s - m), torch.zeros_like(s))
            den = p.sum(-1, keepdim=True)
            w = p / torch.where(den > 0, den, torch.ones_like(den))
            ws.append(w)
            ctxs.append(self.dropout(w) @ values)
        ctx = torch.stack(ctxs, dim=-1).reshape(B, Tq, -1)
        return self.W_o(ctx), torch.stack(ws, dim=1)
