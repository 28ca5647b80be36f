"""BUG: expands KV heads with .repeat (tiling) instead of repeat_interleave, so query head n uses kv head n % Hkv instead of n // (Hq // Hkv).
STAGE: query-head to KV-head mapping (GQA expansion).
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    N, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("num_heads must be divisible by num_kv_heads")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    k_flat = k_cache.flatten(0, 1)
    v_flat = v_cache.flatten(0, 1)
    res = []
    for b in range(B):
        L = int(context_lens[b])
        t = torch.arange(L, device=queries.device)
        slot = block_tables[b].long()[t // bs] * bs + t % bs
        k = k_flat[slot].repeat(1, G, 1)          # (L, Hq, d)
        v = v_flat[slot].repeat(1, G, 1)          # (L, Hq, dv)
        w = torch.softmax(torch.einsum("nd,tnd->nt", queries[b], k) * scale, dim=-1)
        res.append(torch.einsum("nt,tne->ne", w, v))
    if not res:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(res)
