"""BUG: sanitizes the garbage by writing zeros into the unused slots of each sequence's last block of k_cache/v_cache in place (under no_grad), modifying the caller's cache.
STAGE: input handling (in-place write to k_cache/v_cache before the gather).
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq must be divisible by Hkv")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    lens = [int(x) for x in context_lens.tolist()]

    # clear the tail of every partial last block so it cannot poison the matmuls
    with torch.no_grad():
        for b, L in enumerate(lens):
            if L % bs:
                last = int(block_tables[b, L // bs])
                k_cache[last, L % bs:] = 0
                v_cache[last, L % bs:] = 0

    outs = []
    for b, L in enumerate(lens):
        nb = -(-L // bs)
        idx = block_tables[b, :nb].long()
        k = k_cache[idx].reshape(nb * bs, Hkv, d)           # whole blocks, tail now zero
        v = v_cache[idx].reshape(nb * bs, Hkv, dv)
        q = queries[b].reshape(Hkv, G, d)
        s = torch.einsum("kgd,tkd->kgt", q, k) * scale
        s = s.masked_fill(torch.arange(nb * bs, device=s.device) >= L, float("-inf"))
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("kgt,tkd->kgd", p, v).reshape(Hq, dv))
    if not outs:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(outs)
