"""BUG: swaps the block/slot arithmetic: token t is read from block_tables[b, t % block_size] at slot t // block_size instead of block t // block_size, slot t % block_size.
STAGE: token-to-(block, slot) address computation in the gather.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    block_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq must be divisible by Hkv")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    outs = []
    for b in range(B):
        L = int(context_lens[b])
        t = torch.arange(L, device=queries.device)
        blocks = block_tables[b].long()[t % block_size]
        slots = t // block_size
        k = k_cache[blocks, slots]                  # (L, Hkv, d)
        v = v_cache[blocks, slots]                  # (L, Hkv, dv)
        k = k.repeat_interleave(G, dim=1)
        v = v.repeat_interleave(G, dim=1)
        s = torch.einsum("hd,lhd->hl", queries[b], k) * scale
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("hl,lhd->hd", p, v))
    if not outs:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(outs)
