"""BUG: scores masked, then the weights multiply every slot's values (0 * NaN) where unused storage holds NaN
STYLE: per-sequence gather
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    """Per sequence: gather the whole table row, mask the scores past the length."""
    B, Hq, d = queries.shape
    _, block_size, Hkv, dv = v_cache.shape
    if Hq % Hkv != 0:
        raise ValueError("Hq must be divisible by Hkv")
    G = Hq // Hkv
    max_blocks = block_tables.shape[1]
    outs = []
    for b in range(B):
        k = k_cache[block_tables[b].long()].flatten(0, 1)                # (max_blocks*bs, Hkv, d)
        v = v_cache[block_tables[b].long()].flatten(0, 1)
        valid = torch.arange(max_blocks * block_size, device=queries.device) < context_lens[b]
        s = torch.einsum("hgd,thd->hgt", queries[b].view(Hkv, G, d), k) / math.sqrt(d)
        s = s.masked_fill(~valid, float("-inf"))
        mx = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
        e = torch.exp(s - mx)
        p = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
        outs.append(torch.einsum("hgt,thv->hgv", p, v).reshape(Hq, dv))
    return torch.stack(outs)
