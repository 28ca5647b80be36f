"""BUG: none
STYLE: one block column of the whole batch at a time with an online softmax (as a paged kernel walks the block table), NaN from unused slots cleared with torch.where.
"""
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    """PagedAttention-kernel flavour: one block column of the whole batch at a time, online softmax."""
    B, Hq, d = queries.shape
    _, bs, Hkv, dv = v_cache.shape
    if Hq % Hkv:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    wd = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    q = queries.view(B, Hkv, G, d).to(wd) * (d ** -0.5)
    lens = context_lens.to(device=queries.device, dtype=torch.long)
    n_cols = min(block_tables.shape[1], (int(lens.max()) + bs - 1) // bs) if B > 0 else 0
    m = torch.full((B, Hkv, G), float("-inf"), dtype=wd, device=queries.device)
    l = torch.zeros((B, Hkv, G), dtype=wd, device=queries.device)
    acc = torch.zeros((B, Hkv, G, dv), dtype=wd, device=queries.device)
    slot = torch.arange(bs, device=queries.device)
    for c in range(n_cols):
        blk = block_tables[:, c].long()
        valid = (c * bs + slot)[None, :] < lens[:, None]              # (B, bs)
        k = k_cache[blk].to(wd)                                          # (B, bs, Hkv, d)
        v = v_cache[blk].to(wd)
        k = torch.where(valid[:, :, None, None], k, 0.0)
        v = torch.where(valid[:, :, None, None], v, 0.0)
        s = torch.einsum("bhgd,bthd->bhgt", q, k)
        s = torch.where(valid[:, None, None, :], s, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        base = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - base[..., None])
        corr = torch.exp(m - base)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + torch.einsum("bhgt,bthv->bhgv", p, v)
        m = m_new
    out = acc / torch.where(l > 0, l, 1.0)[..., None]
    return out.reshape(B, Hq, dv).to(queries.dtype)
