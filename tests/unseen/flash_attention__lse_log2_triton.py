"""STYLE: Triton fused-attention tutorial ported to PyTorch (exp2 with log2(e) folded into the scale)
BUG: the returned lse is left in base 2 (m2 + log2(l), the kernel's internal units) instead of natural log.
STAGE: lse
WHEN: always (lse only; the output is right)
"""
import math

import torch

LOG2E = 1.4426950408889634


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("BLOCK_M and BLOCK_N must be >= 1")
    N_CTX_Q, HEAD_DIM = queries.shape[-2], queries.shape[-1]
    N_CTX_K = keys.shape[-2]
    acc_ty = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    qk_scale = LOG2E / math.sqrt(HEAD_DIM)
    delta = N_CTX_K - N_CTX_Q
    dev = queries.device

    out_blocks, m_blocks = [], []
    for start_m in range(0, N_CTX_Q, block_q):
        q = queries[..., start_m:start_m + block_q, :].to(acc_ty)
        BLOCK_M = q.shape[-2]
        offs_m = start_m + torch.arange(BLOCK_M, device=dev)
        m_i = torch.full(q.shape[:-1], -float("inf"), dtype=acc_ty, device=dev)
        l_i = torch.zeros(q.shape[:-1], dtype=acc_ty, device=dev)
        acc = torch.zeros(*q.shape[:-1], values.shape[-1], dtype=acc_ty, device=dev)

        hi = min(N_CTX_K, start_m + BLOCK_M + delta) if is_causal else N_CTX_K
        for start_n in range(0, max(hi, 0), block_k):
            k = keys[..., start_n:start_n + block_k, :].to(acc_ty)
            v = values[..., start_n:start_n + block_k, :].to(acc_ty)
            qk = (q @ k.transpose(-1, -2)) * qk_scale
            if is_causal:
                offs_n = start_n + torch.arange(k.shape[-2], device=dev)
                qk = qk.masked_fill(offs_n[None, :] > offs_m[:, None] + delta, -float("inf"))
            m_ij = torch.maximum(m_i, qk.amax(-1))
            m_ij_safe = torch.where(m_ij == -float("inf"), torch.zeros_like(m_ij), m_ij)
            p = torch.exp2(qk - m_ij_safe[..., None])
            alpha = torch.exp2(m_i - m_ij_safe)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v
            m_i = m_ij

        valid = l_i > 0
        l_safe = torch.where(valid, l_i, torch.ones_like(l_i))
        out_blocks.append(acc / l_safe[..., None])
        m_blocks.append(torch.where(valid, m_i + torch.log2(l_safe), torch.full_like(m_i, -float("inf"))))

    return torch.cat(out_blocks, -2).to(queries.dtype), torch.cat(m_blocks, -1).to(queries.dtype)
