"""BUG: an unguarded final division: NaN where context_lens is 0
STYLE: per sequence
"""
"""Paged attention, block column by block column across the batch, online softmax (the shape of
vLLM's v1 kernel loop over a sequence's blocks, vectorised over sequences).

BUG: the final normalisation divides by the running sum unguarded; a sequence with
context_lens == 0 has sum 0 and gets 0/0 = NaN instead of output 0. Every other input is right.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    bs, Hkv = k_cache.shape[1], k_cache.shape[2]
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq % Hkv != 0")
    G = Hq // Hkv
    scale = d ** -0.5
    lens = context_lens.long()
    m = queries.new_full((B, Hq), -math.inf)
    l = queries.new_zeros(B, Hq)
    acc = queries.new_zeros(B, Hq, dv)
    for c in range(block_tables.shape[1]):
        ids = block_tables[:, c].long()
        slot = c * bs + torch.arange(bs, device=queries.device)
        ok = slot[None, :] < lens[:, None]                                      # (B, bs)
        if not bool(ok.any()):
            continue
        kb = k_cache[ids].masked_fill(~ok[:, :, None, None], 0.0)              # (B, bs, Hkv, d)
        vb = v_cache[ids].masked_fill(~ok[:, :, None, None], 0.0)
        kb = kb.repeat_interleave(G, dim=2)                                     # (B, bs, Hq, d)
        vb = vb.repeat_interleave(G, dim=2)
        s = torch.einsum("bhd,bshd->bhs", queries, kb) * scale
        s = s.masked_fill(~ok[:, None, :], -math.inf)
        m_new = torch.maximum(m, s.amax(-1))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - shift[..., None])
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + torch.einsum("bhs,bshd->bhd", p, vb)
        m = m_new
    return acc / l[..., None]
