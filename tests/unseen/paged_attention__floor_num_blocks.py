"""BUG: counts a sequence's blocks with floor division L // block_size, so the tokens of a partial last block are dropped.
STAGE: number of blocks gathered per sequence (partial last block).
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    out = []
    for b in range(B):
        L = int(context_lens[b])
        n_blocks = L // block_size
        idx = block_tables[b, :n_blocks].long()
        k = k_cache.index_select(0, idx).reshape(-1, Hkv, d)[:L]
        v = v_cache.index_select(0, idx).reshape(-1, Hkv, dv)[:L]
        q = queries[b].reshape(Hkv, G, d)
        s = torch.matmul(q, k.permute(1, 2, 0)) * scale
        p = torch.softmax(s, dim=-1)
        out.append(torch.matmul(p, v.permute(1, 0, 2)).reshape(Hq, dv))
    if not out:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(out)
