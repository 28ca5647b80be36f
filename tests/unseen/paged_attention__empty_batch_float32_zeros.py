"""Context_len 0 rows built as float32 CPU zeros (dtype lost when all rows empty).
BUG: context_len 0 rows built as float32 CPU zeros (dtype lost when all rows empty)."""
import math
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    Nb, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    outs = []
    for b in range(B):
        n = int(context_lens[b])
        if n == 0:
            outs.append(torch.zeros(Hq, dv))
            continue
        nb = (n + bs - 1) // bs
        blocks = block_tables[b, :nb].long()
        kb = k_cache[blocks].reshape(nb * bs, Hkv, d)[:n]
        vb = v_cache[blocks].reshape(nb * bs, Hkv, dv)[:n]
        qg = queries[b].view(Hkv, G, d)
        s = torch.einsum("hgd,nhd->hgn", qg, kb) * scale
        w = torch.softmax(s, dim=-1)
        o = torch.einsum("hgn,nhv->hgv", w, vb).reshape(Hq, dv)
        outs.append(o)
    return torch.stack(outs, 0)
