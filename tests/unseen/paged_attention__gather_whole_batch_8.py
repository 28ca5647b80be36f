"""BUG: k_cache[block_tables] for the whole batch: right values, past the memory bound
STYLE: whole batch
"""
"""Paged attention vectorised over the batch: k_cache[block_tables] gathers every sequence to
the table's full length, padding slots are zeroed with torch.where and masked. Values are right,
garbage in unused storage included.

BUG: the gather is B * max_blocks * block_size * Hkv * d elements: the padding paging exists to
avoid, over the contract's memory bound when one sequence is much longer than the others.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    idx = block_tables.long()
    T = idx.shape[1] * bs
    K = k_cache[idx].reshape(B, T, Hkv, d)
    V = v_cache[idx].reshape(B, T, Hkv, dv)
    valid = torch.arange(T, device=queries.device)[None, :] < context_lens.long()[:, None]   # (B, T)
    K = torch.where(valid[..., None, None], K, torch.zeros((), dtype=K.dtype, device=K.device))
    V = torch.where(valid[..., None, None], V, torch.zeros((), dtype=V.dtype, device=V.device))
    q = queries.view(B, Hkv, G, d)
    s = torch.einsum("bkgd,btkd->bkgt", q, K) / math.sqrt(d)
    s = s.masked_fill(~valid[:, None, None, :], -math.inf)
    mx = s.amax(-1, keepdim=True).detach()
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = torch.exp(s - mx)
    den = e.sum(-1, keepdim=True)
    w = e / torch.where(den > 0, den, torch.ones_like(den))
    return torch.einsum("bkgt,btkd->bkgd", w, V).reshape(B, Hq, dv)
