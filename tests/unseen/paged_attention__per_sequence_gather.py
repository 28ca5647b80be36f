"""BUG: none
STYLE: each sequence gathers only its own blocks, sliced to its length
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    """Each sequence gathers only its own blocks, then slices to its length."""
    B, Hq, d = queries.shape
    _, block_size, Hkv, dv = v_cache.shape
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    outs = []
    for b in range(B):
        n_tok = int(context_lens[b])
        if n_tok == 0:
            outs.append(queries.new_zeros(Hq, dv))
            continue
        n_blk = (n_tok + block_size - 1) // block_size
        blocks = block_tables[b, :n_blk].long()
        k = k_cache[blocks].reshape(n_blk * block_size, Hkv, d)[:n_tok]      # (n_tok, Hkv, d)
        v = v_cache[blocks].reshape(n_blk * block_size, Hkv, dv)[:n_tok]
        q = queries[b].view(Hkv, G, d)
        s = torch.einsum("hgd,thd->hgt", q, k) * scale
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("hgt,thv->hgv", p, v).reshape(Hq, dv))
    return torch.stack(outs)
