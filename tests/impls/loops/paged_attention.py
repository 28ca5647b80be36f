"""vLLM's reference style: each sequence's tokens gathered one by one (block number and slot from t), then attention."""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    num_seqs, num_heads, head_size = queries.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if num_heads % num_kv_heads != 0:
        raise ValueError("num_heads must be a multiple of num_kv_heads")
    group = num_heads // num_kv_heads
    scale = 1.0 / math.sqrt(head_size)
    output = []
    for i in range(num_seqs):
        keys, values = [], []
        for t in range(int(context_lens[i].item())):
            block = int(block_tables[i, t // block_size].item())
            keys.append(k_cache[block, t % block_size])  # (Hkv, d)
            values.append(v_cache[block, t % block_size])
        if not keys:
            output.append(queries.new_zeros(num_heads, v_cache.shape[-1]))
            continue
        k = torch.stack(keys).repeat_interleave(group, dim=1)  # (n, Hq, d): one sequence at a time
        v = torch.stack(values).repeat_interleave(group, dim=1)
        scores = scale * torch.einsum("hd,nhd->hn", queries[i], k)
        probs = torch.softmax(scores, dim=-1)
        output.append(torch.einsum("hn,nhd->hd", probs, v))
    return torch.stack(output)
