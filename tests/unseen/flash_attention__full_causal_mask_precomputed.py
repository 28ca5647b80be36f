"""BUG: the causal mask is precomputed once as a full (Tq, Tk) boolean tril(Tk - Tq) and sliced per tile, which materialises an O(Tq*Tk) tensor the memory bound forbids (values are right).
STAGE: the mask memory
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk, dv = keys.shape[-2], values.shape[-1]
    out_dtype = queries.dtype
    acc_dtype = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    q_all, k_all, v_all = queries.to(acc_dtype), keys.to(acc_dtype), values.to(acc_dtype)
    lead = queries.shape[:-2]
    dev = queries.device
    scale = 1.0 / math.sqrt(d)
    causal_mask = None
    if is_causal:
        causal_mask = torch.ones(Tq, Tk, dtype=torch.bool, device=dev).tril(Tk - Tq)

    out_blocks, lse_blocks = [], []
    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        nq = qe - qs
        q = q_all[..., qs:qe, :] * scale
        m_i = torch.full((*lead, nq), float("-inf"), dtype=acc_dtype, device=dev)
        l_i = torch.zeros((*lead, nq), dtype=acc_dtype, device=dev)
        acc = torch.zeros((*lead, nq, dv), dtype=acc_dtype, device=dev)
        for ks in range(0, Tk, block_k):
            ke = min(ks + block_k, Tk)
            s = q @ k_all[..., ks:ke, :].transpose(-1, -2)
            if causal_mask is not None:
                s = s.masked_fill(~causal_mask[qs:qe, ks:ke], float("-inf"))
            m_new = torch.maximum(m_i, s.detach().amax(dim=-1))
            m_use = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_use[..., None])
            alpha = torch.exp(m_i - m_use)
            l_i = l_i * alpha + p.sum(dim=-1)
            acc = acc * alpha[..., None] + p @ v_all[..., ks:ke, :]
            m_i = m_new
        empty = l_i == 0
        denom = torch.where(empty, torch.ones_like(l_i), l_i)
        out_blocks.append(acc / denom[..., None])
        lse_blocks.append(torch.where(empty, torch.full_like(m_i, float("-inf")), m_i + torch.log(denom)))
    return torch.cat(out_blocks, dim=-2).to(out_dtype), torch.cat(lse_blocks, dim=-1).to(out_dtype)
