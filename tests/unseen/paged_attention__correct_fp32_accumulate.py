"""BUG: none
STYLE: mixed-precision per-sequence version: advanced-index the sequence's blocks
(k_cache[table[:n_blocks]]), compute scores/softmax/weighted sum in an at-least-float32
accumulator dtype (float64 stays float64), repeat_interleave one sequence's keys, cast back.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    bs, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    acc_dtype = torch.promote_types(queries.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)

    lens = context_lens.tolist()
    outs = []
    for b in range(B):
        L = int(lens[b])
        nb = -(-L // bs)
        ids = block_tables[b, :nb].long()
        k = k_cache[ids].reshape(-1, Hkv, d)[:L].to(acc_dtype)
        v = v_cache[ids].reshape(-1, Hkv, dv)[:L].to(acc_dtype)
        k = k.repeat_interleave(G, dim=1).transpose(0, 1)   # (Hq, L, d)
        v = v.repeat_interleave(G, dim=1).transpose(0, 1)   # (Hq, L, dv)
        q = queries[b].to(acc_dtype).unsqueeze(1)           # (Hq, 1, d)
        scores = torch.bmm(q, k.transpose(1, 2)) * scale    # (Hq, 1, L)
        probs = torch.softmax(scores, dim=-1)
        o = torch.bmm(probs, v).squeeze(1)                  # (Hq, dv)
        outs.append(o.to(queries.dtype))
    if not outs:
        return queries.new_zeros(B, Hq, dv)
    return torch.stack(outs, dim=0)
