"""BUG: gathers every sequence's whole block table at once (k_cache[block_tables], B * max_blocks * block_size * Hkv * d elements), exceeding the memory bound although the values are right.
STAGE: KV gather (batch-wide materialization of the paged cache).
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    max_blocks = block_tables.shape[1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    T = max_blocks * bs
    k = k_cache[block_tables.long()].reshape(B, T, Hkv, d)
    v = v_cache[block_tables.long()].reshape(B, T, Hkv, dv)
    valid = torch.arange(T, device=queries.device)[None, :] < context_lens.long()[:, None]  # (B, T)
    zero = torch.zeros((), dtype=k.dtype, device=k.device)
    k = torch.where(valid[:, :, None, None], k, zero)
    v = torch.where(valid[:, :, None, None], v, zero)
    q = queries.reshape(B, Hkv, G, d)
    s = torch.einsum("bkgd,btkd->bkgt", q, k) * scale
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    mx = s.detach().amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    e = torch.exp(s - mx)
    den = e.sum(-1, keepdim=True)
    p = e / torch.where(den > 0, den, torch.ones_like(den))
    out = torch.einsum("bkgt,btkd->bkgd", p, v)
    return out.reshape(B, Hq, dv)
