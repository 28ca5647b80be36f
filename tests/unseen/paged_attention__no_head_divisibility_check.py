"""BUG: never raises ValueError when Hq % Hkv != 0; it maps heads with n * Hkv // Hq (equal to n // (Hq // Hkv) when divisible) and silently returns a result.
STAGE: argument validation (missing Hq % Hkv check).
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    block_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[-1]
    scale = 1.0 / math.sqrt(d)
    kv_of_head = (torch.arange(Hq, device=queries.device) * Hkv) // Hq
    outs = []
    for b in range(B):
        L = int(context_lens[b])
        nb = (L + block_size - 1) // block_size
        blocks = block_tables[b, :nb].long()
        k = k_cache.index_select(0, blocks).flatten(0, 1)[:L]     # (L, Hkv, d)
        v = v_cache.index_select(0, blocks).flatten(0, 1)[:L]
        k = k.index_select(1, kv_of_head).transpose(0, 1)          # (Hq, L, d)
        v = v.index_select(1, kv_of_head).transpose(0, 1)          # (Hq, L, dv)
        s = torch.bmm(k, queries[b].unsqueeze(-1)).squeeze(-1) * scale
        p = torch.softmax(s, dim=-1)
        outs.append(torch.bmm(p.unsqueeze(1), v).squeeze(1))
    if not outs:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(outs)
