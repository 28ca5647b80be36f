"""BUG: unused key slots are masked in the scores only (after q . k), not replaced before the product: the forward is
right, but where the cache holds NaN in unused slots the backward carries 0 * NaN = NaN into the queries' gradient
STAGE: the gradient of queries
STYLE: PagedAttention v1 transcribed to torch: one block column across the batch per iteration, online softmax
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv:
        raise ValueError("Hq must be a multiple of Hkv")
    G = Hq // Hkv
    acc_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    dev = queries.device
    q = (queries.to(acc_dtype) / math.sqrt(d)).view(B, Hkv, G, d)
    ctx = context_lens.to(device=dev, dtype=torch.long)
    max_ctx = int(ctx.max().item()) if B > 0 else 0
    n_cols = (max_ctx + bs - 1) // bs
    m = torch.full((B, Hkv, G, 1), float("-inf"), dtype=acc_dtype, device=dev)
    l = torch.zeros((B, Hkv, G, 1), dtype=acc_dtype, device=dev)
    acc = torch.zeros((B, Hkv, G, dv), dtype=acc_dtype, device=dev)
    slot = torch.arange(bs, device=dev)
    for c in range(n_cols):
        blk = block_tables[:, c].long()
        valid = (c * bs + slot)[None, :] < ctx[:, None]  # (B, bs)
        k = k_cache[blk].to(acc_dtype)  # (B, bs, Hkv, d)
        v = v_cache[blk].to(acc_dtype)
        v = torch.where(valid[:, :, None, None], v, torch.zeros((), dtype=acc_dtype, device=dev))
        s = torch.einsum("bkgd,bskd->bkgs", q, k)
        s = torch.where(valid[:, None, None, :], s, torch.full((), float("-inf"), dtype=acc_dtype, device=dev))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        corr = torch.exp(m - m_use)
        p = torch.exp(s - m_use)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + torch.einsum("bkgs,bskd->bkgd", p, v)
        m = m_new
    out = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out.reshape(B, Hq, dv).to(queries.dtype)
