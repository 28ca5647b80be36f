"""BUG: block index arithmetic swapped: physical block = table[t % bs], slot = t // bs.
STAGE: the block and slot of a token (an index error)
"""
import math
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    block_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[3]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    out = []
    for b in range(B):
        n = int(context_lens[b].item())
        t = torch.arange(n, device=queries.device)
        phys = block_tables[b].long()[t % block_size]
        slot = t // block_size
        k = k_cache[phys, slot]  # (n, Hkv, d)
        v = v_cache[phys, slot]  # (n, Hkv, dv)
        qg = queries[b].reshape(Hkv, G, d)
        kh = k.permute(1, 2, 0)  # (Hkv, d, n)
        scores = torch.matmul(qg, kh) / math.sqrt(d)  # (Hkv, G, n)
        if n > 0:
            w = torch.softmax(scores, dim=-1)
        else:
            w = scores  # empty
        o = torch.matmul(w, v.permute(1, 0, 2))  # (Hkv, G, dv); zeros when n == 0
        out.append(o.reshape(Hq, dv))
    return torch.stack(out)
