"""BUG: none
STYLE: one block column across the batch at a time, an online softmax, K and V masked before the products
"""
"""One block column across the batch at a time, online softmax (the shape of vLLM's v1 kernel
loop, vectorised over sequences)."""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    n_blocks, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hkv < 1 or Hq % Hkv:
        raise ValueError("query heads must be a multiple of kv heads")
    G = Hq // Hkv
    acc_t = torch.promote_types(queries.dtype, torch.float32)
    q = queries.view(B, Hkv, G, d).to(acc_t) / math.sqrt(d)
    lens = context_lens.to(torch.long)
    m = torch.full((B, Hkv, G, 1), -math.inf, dtype=acc_t, device=queries.device)
    l = torch.zeros((B, Hkv, G, 1), dtype=acc_t, device=queries.device)
    acc = torch.zeros((B, Hkv, G, dv), dtype=acc_t, device=queries.device)
    max_len = int(lens.max()) if B else 0
    slot = torch.arange(bs, device=queries.device)
    for c in range((max_len + bs - 1) // bs):
        ids = block_tables[:, c].long()
        valid = (c * bs + slot)[None, :] < lens[:, None]                   # (B, bs)
        zero = torch.zeros((), dtype=acc_t, device=queries.device)
        kb = torch.where(valid[:, :, None, None], k_cache[ids].to(acc_t), zero)   # (B, bs, Hkv, d)
        vb = torch.where(valid[:, :, None, None], v_cache[ids].to(acc_t), zero)
        s = torch.einsum("bhgd,bshd->bhgs", q, kb)
        s = torch.where(valid[:, None, None, :], s, -math.inf)             # garbage (even NaN) dropped
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_use = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - m_use)
        corr = torch.exp(m - m_use)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + torch.einsum("bhgs,bshv->bhgv", p, vb)
        m = m_new
    out = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out.reshape(B, Hq, dv).to(queries.dtype)
