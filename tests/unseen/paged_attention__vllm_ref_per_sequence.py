"""BUG: none
STYLE: vLLM's reference: each sequence gathers its own context_len tokens, K/V repeated per head group
"""
"""Paged attention after vLLM's test reference (ref_single_query_cached_kv_attention):
per sequence, gather its context_len tokens from the block table, repeat K/V per query head
group, softmax, weighted sum. Only valid tokens are ever read.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    num_seqs, num_query_heads, head_size = queries.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if num_query_heads % num_kv_heads != 0:
        raise ValueError(f"{num_query_heads} query heads are not a multiple of {num_kv_heads} kv heads")
    num_queries_per_kv = num_query_heads // num_kv_heads
    scale = 1.0 / math.sqrt(head_size)
    output = torch.zeros(num_seqs, num_query_heads, dv, dtype=queries.dtype, device=queries.device)
    for i in range(num_seqs):
        context_len = int(context_lens[i])
        if context_len == 0:
            continue
        positions = torch.arange(context_len, device=queries.device)
        block_numbers = block_tables[i].long()[positions // block_size]
        block_offsets = positions % block_size
        keys = k_cache[block_numbers, block_offsets]        # (context_len, num_kv_heads, head_size)
        values = v_cache[block_numbers, block_offsets]
        if num_queries_per_kv > 1:
            keys = torch.repeat_interleave(keys, num_queries_per_kv, dim=1)
            values = torch.repeat_interleave(values, num_queries_per_kv, dim=1)
        attn = scale * torch.einsum("hd,nhd->hn", queries[i], keys)
        attn = torch.softmax(attn, dim=-1)
        output[i] = torch.einsum("hn,nhd->hd", attn, values)
    return output
