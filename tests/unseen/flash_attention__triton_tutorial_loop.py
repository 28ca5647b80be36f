"""BUG: none
STYLE: a port of the Triton tutorial's loop (query blocks outer), block masks from positions, key blocks no row sees skipped
"""
"""FlashAttention forward, a PyTorch port of the Triton tutorial's _attn_fwd loop.

Outer loop over query blocks (one "program" each), inner loop over key blocks with a running
max m_i, running sum l_i and an unnormalised accumulator.
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    L = math.prod(lead)
    acc_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    dev = queries.device

    q = queries.reshape(L, Tq, d)
    k = keys.reshape(L, Tk, d)
    v = values.reshape(L, Tk, dv)
    sm_scale = 1.0 / math.sqrt(d)
    offset = Tk - Tq  # bottom-right alignment

    out_blocks, lse_blocks = [], []
    for start_m in range(0, Tq, block_q):
        end_m = min(start_m + block_q, Tq)
        bm = end_m - start_m
        q_blk = q[:, start_m:end_m].to(acc_dtype) * sm_scale
        m_i = torch.full((L, bm), float("-inf"), dtype=acc_dtype, device=dev)
        l_i = torch.zeros((L, bm), dtype=acc_dtype, device=dev)
        acc = torch.zeros((L, bm, dv), dtype=acc_dtype, device=dev)
        offs_m = torch.arange(start_m, end_m, device=dev) + offset
        # keys past the last row's position are masked for the whole block: skip them
        hi = min(Tk, end_m + offset) if is_causal else Tk
        for start_n in range(0, max(hi, 0), block_k):
            end_n = min(start_n + block_k, hi)
            qk = q_blk @ k[:, start_n:end_n].to(acc_dtype).transpose(-1, -2)
            if is_causal:
                offs_n = torch.arange(start_n, end_n, device=dev)
                qk = qk.masked_fill(offs_n[None, :] > offs_m[:, None], float("-inf"))
            m_ij = torch.maximum(m_i, qk.amax(-1))
            m_safe = torch.where(m_ij == float("-inf"), torch.zeros_like(m_ij), m_ij)
            p = torch.exp(qk - m_safe[..., None])
            alpha = torch.exp(m_i - m_safe)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v[:, start_n:end_n].to(acc_dtype)
            m_i = m_ij
        l_safe = torch.where(l_i > 0, l_i, torch.ones_like(l_i))
        out_blocks.append(acc / l_safe[..., None])
        lse_blocks.append(torch.where(l_i > 0, m_i + torch.log(l_safe),
                                      torch.full_like(l_i, float("-inf"))))
    out = torch.cat(out_blocks, dim=1).reshape(*lead, Tq, dv).to(queries.dtype)
    lse = torch.cat(lse_blocks, dim=1).reshape(*lead, Tq).to(queries.dtype)
    return out, lse
