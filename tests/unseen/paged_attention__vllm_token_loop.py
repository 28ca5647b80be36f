"""BUG: none
STYLE: vLLM's reference token loop, float64
"""
"""Reference-style loop over tokens, like the ref_single_query_cached_kv_attention helper in
vLLM's kernel tests, but with float64 accumulation and GQA by index."""
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    num_seqs, num_query_heads, head_size = queries.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if num_query_heads % num_kv_heads != 0:
        raise ValueError("num_query_heads must be divisible by num_kv_heads")
    num_queries_per_kv = num_query_heads // num_kv_heads
    head_mapping = torch.arange(num_query_heads, device=queries.device) // num_queries_per_kv
    scale = float(1.0 / (head_size ** 0.5))
    out = []
    for i in range(num_seqs):
        q = queries[i].unsqueeze(0).to(torch.float64)            # (1, Hq, d)
        block_table = block_tables[i]
        seq_len = int(context_lens[i])
        if seq_len == 0:
            out.append(torch.zeros(num_query_heads, v_cache.shape[-1], dtype=queries.dtype, device=queries.device))
            continue
        keys_lst, values_lst = [], []
        for j in range(seq_len):
            block_number = int(block_table[j // block_size])
            block_offset = j % block_size
            keys_lst.append(k_cache[block_number, block_offset])      # (Hkv, d)
            values_lst.append(v_cache[block_number, block_offset])
        keys = torch.stack(keys_lst, dim=0).to(torch.float64)[:, head_mapping]      # (T, Hq, d)
        values = torch.stack(values_lst, dim=0).to(torch.float64)[:, head_mapping]
        attn = scale * torch.einsum("qhd,khd->hqk", q, keys)
        attn = torch.softmax(attn, dim=-1)
        o = torch.einsum("hqk,khd->qhd", attn, values)
        out.append(o[0].to(queries.dtype))
    return torch.stack(out, dim=0)
