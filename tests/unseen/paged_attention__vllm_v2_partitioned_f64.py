"""BUG: none
STYLE: vLLM PagedAttention v2 (partitioned: per-partition max_logits / exp_sums / tmp_out, then a reduce kernel), per sequence and per partition of blocks, float64 accumulation, repeat_interleave for GQA
"""
import math

import torch

PARTITION_BLOCKS = 2


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    num_seqs, num_heads, head_size = queries.shape
    num_blocks, block_size, num_kv_heads, _ = k_cache.shape
    v_size = v_cache.shape[-1]
    if num_heads % num_kv_heads != 0:
        raise ValueError("num_heads must be divisible by num_kv_heads")
    num_queries_per_kv = num_heads // num_kv_heads
    f64 = torch.float64
    scale = 1.0 / math.sqrt(head_size)
    result = []
    for seq in range(num_seqs):
        ctx = int(context_lens[seq])
        q = queries[seq].to(f64)
        if ctx == 0:
            result.append(torch.zeros(num_heads, v_size, dtype=queries.dtype, device=queries.device))
            continue
        tokens_per_part = PARTITION_BLOCKS * block_size
        max_logits, exp_sums, tmp_out = [], [], []
        for start in range(0, ctx, tokens_per_part):
            end = min(start + tokens_per_part, ctx)
            first_blk, last_blk = start // block_size, (end - 1) // block_size
            blk_ids = block_tables[seq, first_blk:last_blk + 1].to(torch.long)
            k = k_cache[blk_ids].flatten(0, 1)[: end - start]  # start is block aligned
            v = v_cache[blk_ids].flatten(0, 1)[: end - start]
            k = k.to(f64).repeat_interleave(num_queries_per_kv, dim=1)  # (t, Hq, d)
            v = v.to(f64).repeat_interleave(num_queries_per_kv, dim=1)
            logits = torch.einsum("hd,thd->ht", q, k) * scale
            mx = logits.max(dim=-1, keepdim=True).values
            e = torch.exp(logits - mx)
            max_logits.append(mx)
            exp_sums.append(e.sum(-1, keepdim=True))
            tmp_out.append(torch.einsum("ht,thd->hd", e, v))
        max_logits = torch.cat(max_logits, dim=-1)  # (Hq, parts)
        global_max = max_logits.max(dim=-1, keepdim=True).values
        rescale = torch.exp(max_logits - global_max)  # (Hq, parts)
        total = (torch.cat(exp_sums, dim=-1) * rescale).sum(-1, keepdim=True)
        out = (torch.stack(tmp_out, dim=-1) * rescale[:, None, :]).sum(-1) / total
        result.append(out.to(queries.dtype))
    return torch.stack(result, dim=0)
