"""BUG: assumes the new token is not yet in the cache and attends only to the first context_lens[b] - 1 tokens (off by one).
STAGE: number of context tokens attended per sequence.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    num_blocks, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq not divisible by Hkv")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    tables = block_tables.tolist()
    outputs = []
    for b in range(B):
        # past tokens only; the query token itself is "the current one"
        n_past = max(int(context_lens[b]) - 1, 0)
        keys, values = [], []
        for t in range(n_past):
            blk = tables[b][t // block_size]
            keys.append(k_cache[blk, t % block_size])
            values.append(v_cache[blk, t % block_size])
        if keys:
            K, V = torch.stack(keys), torch.stack(values)       # (T, Hkv, d)
        else:
            K, V = k_cache[0, :0], v_cache[0, :0]               # no past tokens
        K = K.repeat_interleave(G, dim=1)                       # (T, Hq, d)
        V = V.repeat_interleave(G, dim=1)
        s = torch.einsum("hd,thd->ht", queries[b], K) * scale
        outputs.append(torch.einsum("ht,thd->hd", s.softmax(-1), V))
    if not outputs:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(outputs)
