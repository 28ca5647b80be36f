"""BUG: slots past context_lens are masked only in the scores (-inf), not zeroed in k/v: NaN in unused storage leaks through p @ v (0 * NaN).
STAGE: unused slots read (NaN reaches the output)
"""
import math
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, block_size, Hkv, dv = v_cache.shape
    if Hq % Hkv:
        raise ValueError("number of query heads must be divisible by kv heads")
    G = Hq // Hkv
    max_blocks = block_tables.shape[1]
    scale = 1.0 / math.sqrt(d)
    q = queries.view(B, Hkv, G, d) * scale
    ctx = context_lens.to(device=queries.device, dtype=torch.long)

    m = torch.full((B, Hkv, G), float("-inf"), dtype=queries.dtype, device=queries.device)
    l = torch.zeros((B, Hkv, G), dtype=queries.dtype, device=queries.device)
    acc = torch.zeros((B, Hkv, G, dv), dtype=queries.dtype, device=queries.device)
    n_cols = int((ctx.max().item() + block_size - 1) // block_size) if B > 0 else 0
    offs = torch.arange(block_size, device=queries.device)
    for col in range(min(n_cols, max_blocks)):
        blk = block_tables[:, col].long()  # (B,)
        tok = col * block_size + offs  # (block_size,)
        valid = tok[None, :] < ctx[:, None]  # (B, block_size)
        k = k_cache[blk]  # (B, bs, Hkv, d)
        v = v_cache[blk]
        s = torch.einsum("bhgd,bthd->bhgt", q, k)  # (B, Hkv, G, bs)
        s = torch.where(valid[:, None, None, :], s, torch.full((), float("-inf"), dtype=s.dtype, device=s.device))
        m_new = torch.maximum(m, s.amax(dim=-1))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - m_safe)  # exp(-inf) = 0 for the first real block
        p = torch.exp(s - m_safe[..., None])
        l = l * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + torch.einsum("bhgt,bthd->bhgd", p, v)
        m = m_new
    out = acc / torch.where(l > 0, l, torch.ones_like(l))[..., None]
    return out.reshape(B, Hq, dv)
