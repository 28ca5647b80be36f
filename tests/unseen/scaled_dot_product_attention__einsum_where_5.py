"""BUG: none
STYLE: einsum-only functional code (as in lucidrains-style repos) with a hand-written max-subtracted softmax over torch.where-selected entries.
"""
import math
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d = queries.size(-1)
    sim = torch.einsum('...id,...jd->...ij', queries, keys) / math.sqrt(d)
    if mask is None:
        allowed = torch.ones_like(sim, dtype=torch.bool)
    else:
        allowed = mask.expand_as(sim)
    neg_inf = torch.tensor(float('-inf'), dtype=sim.dtype, device=sim.device)
    zero = torch.zeros((), dtype=sim.dtype, device=sim.device)
    row_max = torch.where(allowed, sim, neg_inf).amax(dim=-1, keepdim=True).detach()
    row_max = torch.where(torch.isfinite(row_max), row_max, zero)
    shifted = torch.where(allowed, sim - row_max, zero)
    e = torch.where(allowed, shifted.exp(), zero)
    denom = e.sum(dim=-1, keepdim=True)
    attn = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    out = torch.einsum('...ij,...jd->...id', attn, values)
    return out, attn
