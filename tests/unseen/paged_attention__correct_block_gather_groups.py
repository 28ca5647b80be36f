"""BUG: none
STYLE: per-sequence block gather: index_select the ceil(L / block_size) blocks named by the
table, reshape them into one token axis and cut it to L; GQA by reshaping the queries into
(Hkv, group) instead of repeating the keys.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq must be a multiple of Hkv")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)

    tables = block_tables.to(torch.long)
    out = []
    for b in range(B):
        L = int(context_lens[b])
        n_blocks = (L + block_size - 1) // block_size
        idx = tables[b, :n_blocks]
        k = k_cache.index_select(0, idx).reshape(n_blocks * block_size, Hkv, d)[:L]
        v = v_cache.index_select(0, idx).reshape(n_blocks * block_size, Hkv, dv)[:L]
        q = queries[b].reshape(Hkv, G, d)
        s = torch.matmul(q, k.permute(1, 2, 0)) * scale     # (Hkv, G, L)
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p, v.permute(1, 0, 2))             # (Hkv, G, dv)
        out.append(o.reshape(Hq, dv))
    if B == 0:
        return queries.new_zeros(0, Hq, dv)
    return torch.stack(out)
