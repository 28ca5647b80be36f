"""BUG: upcasts with .float() to accumulate in float32 and returns that tensor without casting back, so the output is float32 for every input dtype (float64 inputs also lose precision).
STAGE: output dtype (accumulator not cast back to queries.dtype).
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
    scale = 1.0 / math.sqrt(d)
    out = torch.zeros(B, Hq, dv, device=queries.device, dtype=torch.float32)
    rows = []
    for b in range(B):
        L = int(context_lens[b])
        nb = -(-L // bs)
        ids = block_tables[b, :nb].long()
        k = k_cache[ids].reshape(-1, Hkv, d)[:L].float()
        v = v_cache[ids].reshape(-1, Hkv, dv)[:L].float()
        k = k.repeat_interleave(G, dim=1).transpose(0, 1)   # (Hq, L, d)
        v = v.repeat_interleave(G, dim=1).transpose(0, 1)
        q = queries[b].float().unsqueeze(1)                 # (Hq, 1, d)
        probs = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * scale, dim=-1)
        rows.append(torch.bmm(probs, v).squeeze(1))
    if rows:
        out = torch.stack(rows)
    return out
