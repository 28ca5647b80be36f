"""One head at a time: its own slices of W_q and W_ukv, the cache read as it is; absorbed mode folds W_uk into q."""
import torch
from torch import nn

from .rope import apply_rope


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        for name, v in (("num_heads", num_heads), ("kv_rank", kv_rank), ("head_dim_nope", head_dim_nope),
                        ("head_dim_rope", head_dim_rope), ("head_dim_v", head_dim_v)):
            if v < 1:
                raise ValueError(f"{name} must be >= 1")
        if head_dim_rope % 2:
            raise ValueError("head_dim_rope must be even")
        self.cfg = (num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v)
        self.base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        H, r, dn, dr, dv = self.cfg
        B, T, _ = x.shape
        P = 0 if cache is None else cache[0].shape[1]
        pos = torch.arange(P, P + T, device=x.device)
        ckr = self.W_dkv(x)
        c = ckr[..., :r]
        kr = apply_rope(ckr[..., r:], pos, base=self.base)
        if cache is not None:
            c, kr = torch.cat([cache[0], c], 1), torch.cat([cache[1], kr], 1)
        S = c.shape[1]
        mask = torch.arange(S, device=x.device)[None, :] <= (pos[:, None])  # (T, S)
        qall = self.W_q(x)
        outs = []
        for n in range(H):
            qh = qall[..., n * (dn + dr):(n + 1) * (dn + dr)]
            qn, qr = qh[..., :dn], apply_rope(qh[..., dn:], pos, base=self.base)
            Wn = self.W_ukv.weight[n * (dn + dv):(n + 1) * (dn + dv)]  # (dn+dv, r)
            if absorb:
                s = (qn @ Wn[:dn]) @ c.transpose(1, 2)  # (B, T, S): W_uk folded into the query
            else:
                s = qn @ (c @ Wn[:dn].T).transpose(1, 2)
            s = (s + qr @ kr.transpose(1, 2)) / (dn + dr) ** 0.5
            p = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
            outs.append((p @ c) @ Wn[dn:].T if absorb else p @ (c @ Wn[dn:].T))
        return self.W_o(torch.cat(outs, -1)), (c, kr)
