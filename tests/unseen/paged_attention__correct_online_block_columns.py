"""BUG: none
STYLE: FlashDecoding-like sweep over block columns j across the whole batch with an online
softmax (running max / sum / accumulator per sequence and head), invalid slots selected away
with torch.where before any product, GQA via grouped queries.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("number of query heads must be divisible by number of kv heads")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    dev, dt = queries.device, queries.dtype

    tables = block_tables.long()
    lens = context_lens.long()
    q = queries.reshape(B, Hkv, G, d)

    m = torch.full((B, Hkv, G), float("-inf"), device=dev, dtype=dt)
    l = torch.zeros((B, Hkv, G), device=dev, dtype=dt)
    acc = torch.zeros((B, Hkv, G, dv), device=dev, dtype=dt)

    max_len = int(lens.max()) if B > 0 else 0
    # at least one column (if the table has any) so the output stays attached to the graph
    n_cols = min(max((max_len + bs - 1) // bs, 1), block_tables.shape[1])
    slot = torch.arange(bs, device=dev)
    for j in range(n_cols):
        blk = tables[:, j]                                   # (B,)
        valid = (j * bs + slot)[None, :] < lens[:, None]     # (B, bs)
        k = k_cache.index_select(0, blk)                     # (B, bs, Hkv, d)
        v = v_cache.index_select(0, blk)
        k = torch.where(valid[:, :, None, None], k, torch.zeros((), dtype=k.dtype, device=dev))
        v = torch.where(valid[:, :, None, None], v, torch.zeros((), dtype=v.dtype, device=dev))

        s = torch.einsum("bhgd,bshd->bhgs", q, k) * scale    # (B, Hkv, G, bs)
        s = s.masked_fill(~valid[:, None, None, :], float("-inf"))

        m_new = torch.maximum(m, s.detach().amax(dim=-1))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe[..., None])
        alpha = torch.exp(m - m_safe)
        l = l * alpha + p.sum(dim=-1)
        acc = acc * alpha[..., None] + torch.einsum("bhgs,bshd->bhgd", p, v)
        m = m_new

    l_safe = torch.where(l > 0, l, torch.ones_like(l))
    out = acc / l_safe[..., None]
    return out.reshape(B, Hq, dv)
