"""BUG: online-softmax block sweep divides the accumulator by the running sum without guarding sum == 0, so a sequence with context_lens[b] = 0 gets NaN (0/0) instead of 0.
STAGE: final normalization (acc / l) for empty sequences.
"""
import math

import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, _ = k_cache.shape
    dv = v_cache.shape[-1]
    if Hq % Hkv != 0:
        raise ValueError("Hq must be divisible by Hkv")
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d)
    dev, dt = queries.device, queries.dtype
    tables = block_tables.long()
    lens = context_lens.long()
    q = queries.view(B, Hkv, G, d)

    m = torch.full((B, Hkv, G), float("-inf"), device=dev, dtype=dt)
    l = torch.zeros((B, Hkv, G), device=dev, dtype=dt)
    acc = torch.zeros((B, Hkv, G, dv), device=dev, dtype=dt)
    n_cols = min(max(-(-int(lens.max()) // bs) if B else 0, 1), tables.shape[1])
    offs = torch.arange(bs, device=dev)
    zero = torch.zeros((), device=dev, dtype=dt)
    for j in range(n_cols):
        valid = (j * bs + offs)[None, :] < lens[:, None]             # (B, bs)
        vmask = valid[:, :, None, None]
        k = torch.where(vmask, k_cache[tables[:, j]], zero)         # (B, bs, Hkv, d)
        v = torch.where(vmask, v_cache[tables[:, j]], zero)
        s = torch.einsum("bkgd,bskd->bkgs", q, k) * scale
        s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
        m_new = torch.maximum(m, s.detach().amax(-1))
        m_safe = torch.where(torch.isinf(m_new), zero, m_new)
        p = torch.exp(s - m_safe[..., None])
        corr = torch.exp(m - m_safe)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + torch.einsum("bkgs,bskd->bkgd", p, v)
        m = m_new
    return (acc / l[..., None]).reshape(B, Hq, dv)
