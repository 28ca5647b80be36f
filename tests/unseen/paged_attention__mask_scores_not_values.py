"""BUG: gathers the sequence's whole block table and only masks the scores with -inf, so garbage values in unused slots/blocks are multiplied by zero probabilities (0 * NaN/inf = NaN).
STAGE: weighted sum over values (invalid tokens not selected away before p @ V).
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    max_blocks = block_tables.shape[1]
    if Hq % Hkv != 0:
        raise ValueError("Hq must be a multiple of Hkv")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    pos = torch.arange(max_blocks * bs, device=queries.device)
    outs = []
    for b in range(B):
        L = int(context_lens[b])
        T = max_blocks * bs if L > 0 else 0     # empty sequence: nothing to attend
        idx = block_tables[b].long()
        k = k_cache[idx].reshape(max_blocks * bs, Hkv, d)[:T]
        v = v_cache[idx].reshape(max_blocks * bs, Hkv, dv)[:T]
        k = k.repeat_interleave(G, dim=1).transpose(0, 1)   # (Hq, T, d)
        v = v.repeat_interleave(G, dim=1).transpose(0, 1)   # (Hq, T, dv)
        s = torch.matmul(k, queries[b].unsqueeze(-1)).squeeze(-1) * scale   # (Hq, T)
        s = s.masked_fill(pos[None, :T] >= L, float("-inf"))
        p = torch.softmax(s, dim=-1)
        outs.append(torch.matmul(p.unsqueeze(1), v).squeeze(1))
    if not outs:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(outs)
