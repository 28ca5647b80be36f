"""One block column across the whole batch at a time, an online softmax per sequence and head (a kernel's loop)."""
import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    _, bs, Hkv, dv = v_cache.shape
    if Hq % Hkv:
        raise ValueError(f"Hq={Hq} is not a multiple of Hkv={Hkv}")
    G = Hq // Hkv
    q = queries.reshape(B, Hkv, G, d) / d ** 0.5
    lens = context_lens.long()
    m = torch.full((B, Hkv, G), float("-inf"), dtype=queries.dtype, device=queries.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(B, Hkv, G, dv, dtype=queries.dtype, device=queries.device)
    for c in range(block_tables.shape[1]):
        pos = c * bs + torch.arange(bs, device=queries.device)
        valid = pos[None, :] < lens[:, None]  # (B, bs)
        if not valid.any():
            break
        blk = block_tables[:, c].long()
        k = k_cache[blk].masked_fill(~valid[:, :, None, None], 0.0)  # (B, bs, Hkv, d): garbage cleared first
        v = v_cache[blk].masked_fill(~valid[:, :, None, None], 0.0)
        s = torch.einsum("bhgd,bshd->bhgs", q, k).masked_fill(~valid[:, None, None, :], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        base = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - base[..., None])
        corr = torch.exp(m - base)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + torch.einsum("bhgs,bshv->bhgv", p, v)
        m = m_new
    out = acc / torch.where(l > 0, l, torch.ones_like(l))[..., None]
    return out.reshape(B, Hq, dv)
