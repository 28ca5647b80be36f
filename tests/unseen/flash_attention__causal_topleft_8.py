"""BUG: the tutorial's offs_m >= offs_n causal mask: top-left, wrong where causal and Tq != Tk
STYLE: Triton tutorial port
"""
"""FlashAttention-2 forward in PyTorch (query-block outer loop, deferred normalisation).

BUG: the causal mask is the Triton tutorial's `offs_m[:, None] >= offs_n[None, :]`, written for
Tq == Tk: it is aligned to the top left. With Tq != Tk the contract's bottom-right rule differs.
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be >= 1")
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    q = queries.reshape(-1, Tq, d)
    k = keys.reshape(-1, Tk, d)
    v = values.reshape(-1, Tk, dv)
    L = q.shape[0]
    scale = 1.0 / math.sqrt(d)
    out = torch.empty(L, Tq, dv, dtype=queries.dtype, device=queries.device)
    lse = torch.empty(L, Tq, dtype=queries.dtype, device=queries.device)
    for start_m in range(0, Tq, block_q):
        end_m = min(Tq, start_m + block_q)
        offs_m = torch.arange(start_m, end_m, device=queries.device)
        qi = q[:, start_m:end_m] * scale
        m_i = torch.full((L, end_m - start_m), -math.inf, dtype=queries.dtype, device=queries.device)
        l_i = torch.zeros_like(m_i)
        acc = torch.zeros(L, end_m - start_m, dv, dtype=queries.dtype, device=queries.device)
        hi = min(end_m, Tk) if is_causal else Tk
        for start_n in range(0, hi, block_k):
            end_n = min(hi, start_n + block_k)
            offs_n = torch.arange(start_n, end_n, device=queries.device)
            s = qi @ k[:, start_n:end_n].transpose(1, 2)
            if is_causal:
                s = torch.where(offs_m[:, None] >= offs_n[None, :], s, torch.full_like(s, -math.inf))
            m_new = torch.maximum(m_i, s.amax(-1))
            m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_use[..., None])
            corr = torch.exp(m_i - m_use)
            l_i = corr * l_i + p.sum(-1)
            acc = corr[..., None] * acc + p @ v[:, start_n:end_n]
            m_i = m_new
        has = l_i > 0
        l_one = torch.where(has, l_i, torch.ones_like(l_i))
        out[:, start_m:end_m] = acc / l_one[..., None]
        lse[:, start_m:end_m] = torch.where(has, m_i + torch.log(l_one), torch.full_like(l_i, -math.inf))
    return out.reshape(*lead, Tq, dv), lse.reshape(*lead, Tq)
