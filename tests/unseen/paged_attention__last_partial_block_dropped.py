"""BUG: number of blocks taken as ctx // block_size (floor): the last partial block is dropped, so up to block_size-1 newest tokens are ignored (and ctx < block_size gives an empty sequence -> 0); differs when ctx % block_size != 0.
STAGE: the gathered keys/values
STYLE: vLLM reference (per-sequence gather) port
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    num_seqs, num_query_heads, head_size = queries.shape
    num_kv_heads = k_cache.shape[2]
    block_size = k_cache.shape[1]
    dv = v_cache.shape[-1]
    if num_query_heads % num_kv_heads != 0:
        raise ValueError(f"{num_query_heads} query heads are not a multiple of {num_kv_heads} kv heads")
    G = num_query_heads // num_kv_heads
    scale = 1.0 / math.sqrt(head_size)
    lens = context_lens.tolist()
    outputs = []
    for i in range(num_seqs):
        q = queries[i].view(num_kv_heads, G, head_size)
        n = int(lens[i])
        if n == 0:
            outputs.append(queries.new_zeros(num_query_heads, dv))
            continue
        nblk = n // block_size
        n = nblk * block_size
        if n == 0:
            outputs.append(queries.new_zeros(num_query_heads, dv))
            continue
        blocks = block_tables[i, :nblk].long()
        keys = k_cache.index_select(0, blocks).reshape(nblk * block_size, num_kv_heads, head_size)[:n]
        values = v_cache.index_select(0, blocks).reshape(nblk * block_size, num_kv_heads, dv)[:n]
        scores = torch.einsum("kgd,tkd->kgt", q, keys) * scale
        probs = torch.softmax(scores, dim=-1)
        out = torch.einsum("kgt,tkd->kgd", probs, values)
        outputs.append(out.reshape(num_query_heads, dv))
    return torch.stack(outputs, dim=0)
