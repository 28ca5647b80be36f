"""BUG: scales the scores by 1/sqrt(dv) (the value head size, v_cache.shape[-1]) instead of 1/sqrt(d).
STAGE: score scaling before the softmax.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, block_size, Hkv, _ = k_cache.shape
    head_size = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    scale = head_size ** -0.5
    outs = []
    for b in range(B):
        L = int(context_lens[b])
        nb = -(-L // block_size)
        ids = block_tables[b, :nb].long()
        k = k_cache[ids].reshape(-1, Hkv, d)[:L]
        v = v_cache[ids].reshape(-1, Hkv, head_size)[:L]
        q = queries[b].view(Hkv, G, d)
        s = torch.einsum("kgd,lkd->kgl", q, k) * scale
        p = s.softmax(-1)
        outs.append(torch.einsum("kgl,lke->kge", p, v).reshape(Hq, head_size))
    if not outs:
        return queries.new_zeros(B, Hq, head_size)
    return torch.stack(outs)
