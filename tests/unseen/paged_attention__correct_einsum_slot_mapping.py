"""BUG: none
STYLE: einsum over a flattened cache: per sequence build the slot mapping
slot = table[t // block_size] * block_size + t % block_size, index the (N*block_size, Hkv, d)
view, map query heads to kv heads with an index vector (n // group), einsum attention.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    if queries.dim() != 3:
        raise ValueError("queries must be (B, Hq, d)")
    B, Hq, d = queries.shape
    N, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[3]
    if Hq % Hkv:
        raise ValueError("Hq % Hkv != 0")
    group = Hq // Hkv
    scale = 1.0 / math.sqrt(d)

    k_flat = k_cache.flatten(0, 1)       # (N*bs, Hkv, d)
    v_flat = v_cache.flatten(0, 1)
    kv_head = torch.arange(Hq, device=queries.device) // group

    result = queries.new_zeros(B, Hq, dv)
    rows = []
    for b in range(B):
        L = int(context_lens[b].item())
        t = torch.arange(L, device=queries.device)
        slots = block_tables[b].long()[t // block_size] * block_size + t % block_size
        k = k_flat[slots][:, kv_head]        # (L, Hq, d)
        v = v_flat[slots][:, kv_head]        # (L, Hq, dv)
        logits = torch.einsum("nd,tnd->nt", queries[b], k) * scale
        w = logits.softmax(dim=-1)
        rows.append(torch.einsum("nt,tne->ne", w, v))
    if rows:
        result = torch.stack(rows)
    return result
