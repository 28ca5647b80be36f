"""BUG: none
STYLE: vLLM reference style (ref_single_query_cached_kv_attention): per-sequence loop that
gathers keys/values token by token with block_number = table[t // block_size] and
block_offset = t % block_size, expands KV heads with repeat_interleave, plain softmax attention.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    num_blocks, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"num query heads {Hq} not divisible by num kv heads {Hkv}")
    num_queries_per_kv = Hq // Hkv
    scale = 1.0 / math.sqrt(d)

    tables = block_tables.tolist()
    lens = context_lens.tolist()
    outputs = []
    for b in range(B):
        q = queries[b]                      # (Hq, d)
        block_table = tables[b]
        context_len = int(lens[b])

        keys, values = [], []
        for j in range(context_len):
            block_number = int(block_table[j // block_size])
            block_offset = j % block_size
            keys.append(k_cache[block_number, block_offset])    # (Hkv, d)
            values.append(v_cache[block_number, block_offset])  # (Hkv, dv)
        if keys:
            keys = torch.stack(keys, dim=0)       # (L, Hkv, d)
            values = torch.stack(values, dim=0)   # (L, Hkv, dv)
        else:
            keys = k_cache[0, :0]                 # (0, Hkv, d), still part of the graph
            values = v_cache[0, :0]
        if num_queries_per_kv > 1:
            keys = torch.repeat_interleave(keys, num_queries_per_kv, dim=1)
            values = torch.repeat_interleave(values, num_queries_per_kv, dim=1)

        attn = torch.einsum("hd,thd->ht", q, keys) * scale   # (Hq, L)
        attn = torch.softmax(attn, dim=-1)
        out = torch.einsum("ht,thd->hd", attn, values)      # (Hq, dv); zeros when L == 0
        outputs.append(out)
    if B == 0:
        return queries.new_zeros(0, Hq, dv)
    return torch.stack(outputs, dim=0).to(queries.dtype)
