"""BUG: none
STYLE: FlashAttention-2 forward (Algorithm 1): query blocks outer, key blocks inner, running (m, l, acc), one division at the end, causal key blocks past the diagonal skipped, fp32 statistics for half
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be >= 1")
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    lead = queries.shape[:-2]
    cdt = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    dev = queries.device
    scale = 1.0 / math.sqrt(d)
    offset = Tk - Tq
    o_blocks, lse_blocks = [], []
    for i0 in range(0, Tq, block_q):
        i1 = min(Tq, i0 + block_q)
        q = queries[..., i0:i1, :].to(cdt)
        m = torch.full((*lead, i1 - i0), -math.inf, dtype=cdt, device=dev)
        l = torch.zeros((*lead, i1 - i0), dtype=cdt, device=dev)
        acc = torch.zeros((*lead, i1 - i0, dv), dtype=cdt, device=dev)
        k_end = Tk if not is_causal else max(0, min(Tk, i1 + offset))
        for j0 in range(0, k_end, block_k):
            j1 = min(Tk, j0 + block_k)
            k = keys[..., j0:j1, :].to(cdt)
            v = values[..., j0:j1, :].to(cdt)
            s = torch.matmul(q, k.transpose(-1, -2)) * scale
            if is_causal and j1 - 1 > i0 + offset:
                qi = torch.arange(i0, i1, device=dev).unsqueeze(1)
                kj = torch.arange(j0, j1, device=dev).unsqueeze(0)
                s = s.masked_fill(kj > qi + offset, -math.inf)
            m_new = torch.maximum(m, s.detach().amax(dim=-1))
            m_use = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_use.unsqueeze(-1))
            corr = torch.exp(m - m_use)
            l = corr * l + p.sum(dim=-1)
            acc = corr.unsqueeze(-1) * acc + torch.matmul(p, v)
            m = m_new
        has = l > 0
        o_blocks.append((acc / torch.where(has, l, torch.ones_like(l)).unsqueeze(-1)).to(queries.dtype))
        with torch.no_grad():
            lse = torch.where(has, m + torch.log(torch.where(has, l, torch.ones_like(l))),
                              torch.full_like(l, -math.inf))
        lse_blocks.append(lse.to(queries.dtype))
    return torch.cat(o_blocks, dim=-2), torch.cat(lse_blocks, dim=-1)
