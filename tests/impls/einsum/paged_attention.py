"""Per sequence: the table's blocks indexed, flattened to tokens and cut to the length; GQA by an explicit group axis."""
import torch
import torch.nn.functional as F


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    n_kv = k_cache.size(2)
    if queries.size(1) % n_kv:
        raise ValueError("query heads must be a multiple of key/value heads")
    outs = []
    for seq in range(queries.size(0)):
        length = int(context_lens[seq])
        nblk = -(-length // k_cache.size(1))
        idx = block_tables[seq, :nblk].to(torch.long)
        k = k_cache.index_select(0, idx).flatten(0, 1)[:length]
        v = v_cache.index_select(0, idx).flatten(0, 1)[:length]
        q = queries[seq].unflatten(0, (n_kv, -1))  # (Hkv, G, d)
        att = F.softmax(torch.einsum("kgd,tkd->kgt", q, k) * q.size(-1) ** -0.5, dim=-1)
        outs.append(torch.einsum("kgt,tkv->kgv", att, v).flatten(0, 1))
    return torch.stack(outs)
