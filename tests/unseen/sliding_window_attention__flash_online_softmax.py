"""BUG: none
STYLE: flash-attn reference (block-sparse local): per query block, key sub-blocks over the sink range and the window range with an online softmax (running max / running sum), fp32 accumulators for half
"""
import math

import torch


def sliding_window_attention(queries, keys, values, window, num_sinks=0, block_size=64):
    if not window >= 1 or not num_sinks >= 0 or not block_size >= 1:
        raise ValueError("window >= 1, num_sinks >= 0 and block_size >= 1 are required")
    *lead, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    acc_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    softmax_scale = 1.0 / math.sqrt(d)
    dev = queries.device
    out_blocks = []
    for start_m in range(0, Tq, block_size):
        end_m = min(start_m + block_size, Tq)
        nb = end_m - start_m
        q = queries[..., start_m:end_m, :].to(acc_dtype) * softmax_scale
        pos = (torch.arange(start_m, end_m, device=dev) + (Tk - Tq))[:, None]
        m_i = torch.full((*lead, nb, 1), float("-inf"), dtype=acc_dtype, device=dev)
        l_i = torch.zeros((*lead, nb, 1), dtype=acc_dtype, device=dev)
        acc = torch.zeros((*lead, nb, dv), dtype=acc_dtype, device=dev)
        win_lo = max(0, start_m + Tk - Tq - window + 1)
        win_hi = max(win_lo, min(Tk, end_m + Tk - Tq))
        ranges = [(0, min(num_sinks, win_lo)), (win_lo, win_hi)]
        for a, b in ranges:
            for start_n in range(a, b, block_size):
                end_n = min(start_n + block_size, b)
                k = keys[..., start_n:end_n, :].to(acc_dtype)
                v = values[..., start_n:end_n, :].to(acc_dtype)
                cols = torch.arange(start_n, end_n, device=dev)[None, :]
                keep = (cols <= pos) & ((cols > pos - window) | (cols < num_sinks))
                qk = q @ k.transpose(-1, -2)
                qk = torch.where(keep, qk, torch.full_like(qk, float("-inf")))
                m_new = torch.maximum(m_i, qk.amax(-1, keepdim=True))
                m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                alpha = torch.exp(m_i - m_safe)
                p = torch.exp(qk - m_safe)
                l_i = l_i * alpha + p.sum(-1, keepdim=True)
                acc = acc * alpha + p @ v
                m_i = m_new
        o = acc / torch.where(l_i > 0, l_i, torch.ones_like(l_i))
        out_blocks.append(o.to(queries.dtype))
    return torch.cat(out_blocks, dim=-2)
