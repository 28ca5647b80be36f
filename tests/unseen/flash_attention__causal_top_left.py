"""STYLE: straightforward two-loop FlashAttention-2 forward in PyTorch (block-local causal mask from absolute positions)
BUG: the causal mask is aligned to the top left (key j allowed when j <= i), ignoring the Tk - Tq offset.
STAGE: block scores
WHEN: is_causal with Tq != Tk
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be positive")
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    acc_dtype = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    dev = queries.device
    softmax_scale = 1.0 / math.sqrt(d)

    out = torch.empty(*lead, Tq, dv, dtype=queries.dtype, device=dev)
    lse = torch.empty(*lead, Tq, dtype=queries.dtype, device=dev)

    for qs in range(0, Tq, block_q):
        qe = min(qs + block_q, Tq)
        q_blk = queries[..., qs:qe, :].to(acc_dtype)
        m_i = torch.full((*lead, qe - qs), -float("inf"), dtype=acc_dtype, device=dev)
        l_i = torch.zeros((*lead, qe - qs), dtype=acc_dtype, device=dev)
        o_i = torch.zeros((*lead, qe - qs, dv), dtype=acc_dtype, device=dev)
        rows = torch.arange(qs, qe, device=dev)

        for ks in range(0, Tk, block_k):
            ke = min(ks + block_k, Tk)
            if is_causal and ks > qe - 1:
                break
            k_blk = keys[..., ks:ke, :].to(acc_dtype)
            v_blk = values[..., ks:ke, :].to(acc_dtype)
            s = torch.matmul(q_blk, k_blk.transpose(-1, -2)) * softmax_scale
            if is_causal:
                cols = torch.arange(ks, ke, device=dev)
                s = s.masked_fill(cols[None, :] > rows[:, None], -float("inf"))
            m_new = torch.maximum(m_i, s.amax(dim=-1))
            m_use = torch.where(m_new == -float("inf"), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_use.unsqueeze(-1))
            corr = torch.exp(m_i - m_use)
            l_i = l_i * corr + p.sum(dim=-1)
            o_i = o_i * corr.unsqueeze(-1) + torch.matmul(p, v_blk)
            m_i = m_new

        has_key = l_i > 0
        l_safe = torch.where(has_key, l_i, torch.ones_like(l_i))
        out[..., qs:qe, :] = (o_i / l_safe.unsqueeze(-1)).to(queries.dtype)
        lse[..., qs:qe] = torch.where(has_key, m_i + torch.log(l_safe), torch.full_like(m_i, -float("inf"))).to(
            queries.dtype
        )
    return out, lse
