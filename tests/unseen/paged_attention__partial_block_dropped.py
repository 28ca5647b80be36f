"""BUG: number of blocks = ctx // block_size: the last partial block is dropped.
STAGE: the catalogue's last_block_dropped
"""
import math
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    num_blocks, block_size, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    outs = []
    for b in range(B):
        ctx = int(context_lens[b])
        if ctx == 0:
            outs.append(queries.new_zeros(Hq, dv))
            continue
        nb = ctx // block_size
        blocks = block_tables[b, :nb].long()
        k = k_cache[blocks].reshape(nb * block_size, Hkv, d)[:ctx]  # (ctx, Hkv, d)
        v = v_cache[blocks].reshape(nb * block_size, Hkv, dv)[:ctx]
        if G > 1:
            k = torch.repeat_interleave(k, G, dim=1)
            v = torch.repeat_interleave(v, G, dim=1)
        q = queries[b]  # (Hq, d)
        scores = torch.einsum("hd,thd->ht", q, k) * scale  # (Hq, ctx)
        w = torch.softmax(scores, dim=-1)
        outs.append(torch.einsum("ht,thd->hd", w, v))
    return torch.stack(outs, dim=0)
