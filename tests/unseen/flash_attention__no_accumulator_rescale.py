"""BUG: when the running max grows, l is rescaled by exp(m_old - m_new) but the output accumulator is not (acc += p @ v); right only while each row's maximum sits in its first key block.
STAGE: the online softmax
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
    q_all = queries.to(acc_dtype)
    k_all = keys.to(acc_dtype)
    v_all = values.to(acc_dtype)
    lead = queries.shape[:-2]
    dev = queries.device
    scale = 1.0 / math.sqrt(d)
    offset = Tk - Tq

    out_blocks, lse_blocks = [], []
    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        nq = qe - qs
        q = q_all[..., qs:qe, :] * scale
        m_i = torch.full((*lead, nq), float("-inf"), dtype=acc_dtype, device=dev)
        l_i = torch.zeros((*lead, nq), dtype=acc_dtype, device=dev)
        acc = torch.zeros((*lead, nq, dv), dtype=acc_dtype, device=dev)
        k_stop = min(Tk, qe + offset) if is_causal else Tk
        for ks in range(0, max(k_stop, 0), block_k):
            ke = min(ks + block_k, Tk)
            s = q @ k_all[..., ks:ke, :].transpose(-1, -2)
            if is_causal:
                q_pos = torch.arange(qs, qe, device=dev)[:, None] + offset
                k_pos = torch.arange(ks, ke, device=dev)[None, :]
                s = s.masked_fill(k_pos > q_pos, float("-inf"))
            m_new = torch.maximum(m_i, s.detach().amax(dim=-1))
            m_use = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_use[..., None])
            alpha = torch.exp(m_i - m_use)
            l_i = l_i * alpha + p.sum(dim=-1)
            acc = acc + p @ v_all[..., ks:ke, :]
            m_i = m_new
        empty = l_i == 0
        out = acc / torch.where(empty, torch.ones_like(l_i), l_i)[..., None]
        lse = torch.where(empty, torch.full_like(m_i, float("-inf")), m_i + torch.log(torch.where(empty, torch.ones_like(l_i), l_i)))
        out_blocks.append(out)
        lse_blocks.append(lse)
    output = torch.cat(out_blocks, dim=-2).to(out_dtype)
    lse = torch.cat(lse_blocks, dim=-1).to(out_dtype)
    return output, lse
