"""BUG: none
STYLE: one block column across the batch at a time, an online softmax, groups folded into the query, unused slots zeroed first
"""
"""Paged attention one block column at a time across the batch, with an online softmax, and
grouped heads folded into the query (no K/V repetition). Unused slots are replaced by zeros
(keys and values) before any product, so NaN/inf garbage never reaches the result or its
gradient.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    bs, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[-1]
    if Hq % Hkv:
        raise ValueError("Hq must be a multiple of Hkv")
    G = Hq // Hkv
    q = queries.view(B, Hkv, G, d) * (1.0 / math.sqrt(d))
    lens = context_lens.to(torch.long)
    longest = int(lens.max()) if B else 0
    m = torch.full((B, Hkv, G, 1), -math.inf, dtype=queries.dtype, device=queries.device)
    l = torch.zeros(B, Hkv, G, 1, dtype=queries.dtype, device=queries.device)
    acc = torch.zeros(B, Hkv, G, dv, dtype=queries.dtype, device=queries.device)
    for c in range(block_tables.shape[1]):
        if c * bs >= longest:
            break
        blk = block_tables[:, c].long()
        tok = c * bs + torch.arange(bs, device=queries.device)
        valid = tok[None, :] < lens[:, None]                                   # (B, bs)
        kb = torch.where(valid[:, :, None, None], k_cache.index_select(0, blk), 0.0)
        vb = torch.where(valid[:, :, None, None], v_cache.index_select(0, blk), 0.0)
        s = torch.einsum("bkgd,bskd->bkgs", q, kb)
        s = s.masked_fill(~valid[:, None, None, :], -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        base = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
        p = torch.exp(s - base)
        corr = torch.exp(m - base)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + torch.einsum("bkgs,bskd->bkgd", p, vb)
        m = m_new
    out = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out.reshape(B, Hq, dv)
