"""BUG: the whole last block is gathered and the padding slots are masked only in the scores (-inf), but probs @ values still multiplies 0 by the garbage there: NaN/inf left in unused slots poisons the output. Differs when a sequence's last block has unused slots holding NaN or inf (allowed by the contract).
STAGE: the output
STYLE: vLLM reference port that masks after the matmul instead of slicing
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
        nblk = (n + block_size - 1) // block_size
        blocks = block_tables[i, :nblk].long()
        keys = k_cache.index_select(0, blocks).reshape(nblk * block_size, num_kv_heads, head_size)
        values = v_cache.index_select(0, blocks).reshape(nblk * block_size, num_kv_heads, dv)
        valid = torch.arange(nblk * block_size, device=queries.device) < n
        scores = torch.einsum("kgd,tkd->kgt", q, keys) * scale
        scores = scores.masked_fill(~valid, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.einsum("kgt,tkd->kgd", probs, values)
        outputs.append(out.reshape(num_query_heads, dv))
    return torch.stack(outputs, dim=0)
