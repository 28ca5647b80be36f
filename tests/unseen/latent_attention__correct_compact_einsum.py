"""BUG: none
STYLE: compact einsum implementation with unflattened weights; absorb only changes the einsum order.
"""
import math

import torch
from torch import nn
from .rope import apply_rope


class LatentAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v, rope_base=10000.0):
        super().__init__()
        if min(num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v) < 1 or head_dim_rope % 2:
            raise ValueError("bad MLA sizes")
        self.sizes = (num_heads, kv_rank, head_dim_nope, head_dim_rope, head_dim_v)
        self.rope_base = rope_base
        self.W_q = nn.Linear(embed_dim, num_heads * (head_dim_nope + head_dim_rope), bias=False)
        self.W_dkv = nn.Linear(embed_dim, kv_rank + head_dim_rope, bias=False)
        self.W_ukv = nn.Linear(kv_rank, num_heads * (head_dim_nope + head_dim_v), bias=False)
        self.W_o = nn.Linear(num_heads * head_dim_v, embed_dim, bias=False)

    def forward(self, x, cache=None, absorb=False):
        H, r, dn, dr, dv = self.sizes
        T = x.shape[1]
        P = 0 if cache is None else cache[0].size(1)
        pos = torch.arange(P, P + T, device=x.device)
        q = self.W_q(x).unflatten(-1, (H, dn + dr))  # B T H (dn+dr)
        qn = q[..., :dn]
        qr = apply_rope(q[..., dn:].transpose(1, 2), pos, self.rope_base).transpose(1, 2)
        c, kr = self.W_dkv(x).split([r, dr], -1)
        kr = apply_rope(kr, pos, self.rope_base)
        if cache is not None:
            c, kr = torch.cat((cache[0], c), 1), torch.cat((cache[1], kr), 1)
        w = self.W_ukv.weight.unflatten(0, (H, dn + dv))  # H (dn+dv) r
        wk, wv = w[:, :dn], w[:, dn:]
        if absorb:
            s = torch.einsum('bthc,bsc->bhts', torch.einsum('bthd,hdc->bthc', qn, wk), c)
        else:
            s = torch.einsum('bthd,bshd->bhts', qn, torch.einsum('bsc,hdc->bshd', c, wk))
        s = (s + torch.einsum('bthd,bsd->bhts', qr, kr)) / math.sqrt(dn + dr)
        s = s.masked_fill(torch.arange(P + T, device=x.device) > pos[:, None], float('-inf')).softmax(-1)
        if absorb:
            o = torch.einsum('bhtc,hdc->bthd', torch.einsum('bhts,bsc->bhtc', s, c), wv)
        else:
            o = torch.einsum('bhts,bshd->bthd', s, torch.einsum('bsc,hdc->bshd', c, wv))
        return self.W_o(o.flatten(2)), (c, kr)
