"""BUG: the statistics are kept in base 2 (scores * log2 e, exp2) as in the Triton kernels, but the returned lse is the base-2 value m2 + log2(l), never multiplied by ln 2. The output is right. Differs on: lse for any input (lse / ln 2 instead of lse).
STAGE: lse (base 2 instead of natural log)
STYLE: Triton-tutorial fused attention numerics (exp2, sm_scale * 1.44269504) written in torch
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("blocks must be >= 1")
    Tq, d = queries.shape[-2:]
    Tk, dv = keys.shape[-2], values.shape[-1]
    lead = tuple(queries.shape[:-2])
    acc_t = torch.float32 if queries.element_size() < 4 else queries.dtype
    dev = queries.device
    qk_scale = 1.44269504088896340736 / math.sqrt(d)
    off = Tk - Tq
    outs, lses = [], []
    for start_m in range(0, Tq, block_q):
        end_m = min(Tq, start_m + block_q)
        q = queries[..., start_m:end_m, :].to(acc_t)
        m_i = torch.full(lead + (end_m - start_m,), -math.inf, dtype=acc_t, device=dev)
        l_i = torch.zeros(lead + (end_m - start_m,), dtype=acc_t, device=dev)
        acc = torch.zeros(lead + (end_m - start_m, dv), dtype=acc_t, device=dev)
        hi = min(Tk, end_m + off) if is_causal else Tk
        for start_n in range(0, max(hi, 0), block_k):
            end_n = min(Tk, start_n + block_k)
            qk = (q @ keys[..., start_n:end_n, :].to(acc_t).transpose(-1, -2)) * qk_scale
            if is_causal:
                offs_m = torch.arange(start_m, end_m, device=dev)
                offs_n = torch.arange(start_n, end_n, device=dev)
                qk = qk.masked_fill(offs_m[:, None] + off < offs_n[None, :], -math.inf)
            m_ij = torch.maximum(m_i, qk.detach().max(-1).values)
            m_ij_safe = torch.where(torch.isinf(m_ij), torch.zeros_like(m_ij), m_ij)
            p = torch.exp2(qk - m_ij_safe[..., None])
            alpha = torch.exp2(m_i - m_ij_safe)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ values[..., start_n:end_n, :].to(acc_t)
            m_i = m_ij
        nz = l_i > 0
        outs.append((acc / torch.where(nz, l_i, torch.ones_like(l_i))[..., None]).to(queries.dtype))
        with torch.no_grad():
            lse2 = m_i + torch.log2(torch.where(nz, l_i, torch.ones_like(l_i)))
            lses.append(torch.where(nz, lse2, torch.full_like(lse2, -math.inf)).to(queries.dtype))
    return torch.cat(outs, -2), torch.cat(lses, -1)
