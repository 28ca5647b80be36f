"""Tiled attention keeping the output normalised after every key block (FlashAttention 1's update)."""
import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if not (isinstance(block_q, int) and isinstance(block_k, int)) or block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be positive integers")
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    scale = 1.0 / queries.shape[-1] ** 0.5
    wide = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    o_parts, l_parts = [], []
    for a in range(0, Tq, block_q):
        q = queries[..., a:a + block_q, :].to(wide)
        rows = q.shape[-2]
        m = torch.full(q.shape[:-1], -torch.inf, dtype=wide, device=q.device)
        l = torch.zeros_like(m)
        o = torch.zeros(*q.shape[:-1], values.shape[-1], dtype=wide, device=q.device)
        for b in range(0, Tk, block_k):
            k = keys[..., b:b + block_k, :].to(wide)
            s = q @ k.transpose(-1, -2) * scale
            if is_causal:
                qi = torch.arange(a, a + rows, device=q.device).unsqueeze(1)
                kj = torch.arange(b, b + k.shape[-2], device=q.device).unsqueeze(0)
                s = s.masked_fill(kj - qi > Tk - Tq, -torch.inf)
            m_blk = s.amax(-1)
            m_new = torch.maximum(m, m_blk)
            ok = torch.isfinite(m_new)
            base = torch.where(ok, m_new, torch.zeros_like(m_new))
            p = torch.exp(s - base.unsqueeze(-1))
            l_new = torch.exp(m - base) * l + p.sum(-1)
            denom = torch.where(l_new > 0, l_new, torch.ones_like(l_new)).unsqueeze(-1)
            o = (o * (torch.exp(m - base) * l).unsqueeze(-1) + p @ values[..., b:b + block_k, :].to(wide)) / denom
            m, l = m_new, l_new
        o_parts.append(o)
        l_parts.append(torch.where(l > 0, m + torch.log(l), torch.full_like(l, -torch.inf)))
    return torch.cat(o_parts, -2).to(queries.dtype), torch.cat(l_parts, -1).to(queries.dtype)
