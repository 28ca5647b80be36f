"""BUG: the scores masked, the values not: 0 * NaN from unused storage
STYLE: vLLM
"""
"""Paged attention per sequence: gather the sequence's whole block table (max_blocks * block_size
slots), mask the scores of slots past context_len with -inf, softmax, weights @ values.

BUG: the masked weights are 0, but the gathered values of unused slots may be NaN or inf, and
0 * NaN = NaN (0 * inf too): the output is NaN whenever the unused part of a sequence's blocks
holds such garbage. With clean storage it is right.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    N, bs, Hkv, _ = k_cache.shape
    if Hq % Hkv != 0:
        raise ValueError("num query heads must be divisible by num kv heads")
    G = Hq // Hkv
    outs = []
    for b in range(B):
        blocks = block_tables[b].long()
        K = k_cache[blocks].reshape(-1, Hkv, d)                 # (max_blocks*bs, Hkv, d)
        V = v_cache[blocks].reshape(-1, Hkv, v_cache.shape[-1])
        n = int(context_lens[b])
        valid = torch.arange(K.shape[0], device=queries.device) < n
        K = torch.where(valid[:, None, None], K, torch.zeros_like(K))
        qb = queries[b].view(Hkv, G, d)
        s = torch.einsum("kgd,tkd->kgt", qb, K) / math.sqrt(d)
        s = s.masked_fill(~valid, float("-inf"))
        mx = s.amax(-1, keepdim=True)
        mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
        e = torch.exp(s - mx)
        z = e.sum(-1, keepdim=True)
        w = e / torch.where(z > 0, z, torch.ones_like(z))
        outs.append(torch.einsum("kgt,tkd->kgd", w, V).reshape(Hq, -1))
    return torch.stack(outs)
