"""BUG: block index and slot swapped: token t is read from k_cache[block_tables[b, t % block_size], t // block_size] instead of [block_tables[b, t // block_size], t % block_size]; differs (or raises IndexError) for any sequence with ctx > 1 and block_size > 1.
STAGE: the gathered keys/values
STYLE: llama.cpp / naive port with a per-token slot_mapping built in Python
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    bs, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    out = []
    for b in range(B):
        n = int(context_lens[b])
        if n == 0:
            out.append(torch.zeros(Hq, dv, dtype=queries.dtype, device=queries.device))
            continue
        t = torch.arange(n, device=queries.device)
        blk = block_tables[b].long()[t % bs]
        off = t // bs
        k = k_cache[blk, off]  # (n, Hkv, d)
        v = v_cache[blk, off]
        k = k.repeat_interleave(G, dim=1)
        v = v.repeat_interleave(G, dim=1)
        s = torch.einsum("hd,thd->ht", queries[b], k) / math.sqrt(d)
        p = s.softmax(-1)
        out.append(torch.einsum("ht,thd->hd", p, v))
    return torch.stack(out)
