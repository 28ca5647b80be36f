"""Tiled attention with the key blocks as the outer loop (FlashAttention 1's order): running statistics for
every query row live across the outer loop."""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q <= 0 or block_k <= 0:
        raise ValueError("block sizes must be positive")
    *lead, Tq, d = queries.shape
    Tk, dv = keys.shape[-2], values.shape[-1]
    acc_dtype = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    starts = list(range(0, Tq, block_q))
    O = [torch.zeros(*lead, min(block_q, Tq - i), dv, dtype=acc_dtype, device=queries.device) for i in starts]
    row_max = [torch.full((*lead, min(block_q, Tq - i)), -math.inf, dtype=acc_dtype, device=queries.device) for i in starts]
    row_sum = [torch.zeros_like(m) for m in row_max]
    for j in range(0, Tk, block_k):
        Kj = keys[..., j:j + block_k, :].to(acc_dtype)
        Vj = values[..., j:j + block_k, :].to(acc_dtype)
        cols = torch.arange(j, j + Kj.shape[-2], device=queries.device)
        for n, i in enumerate(starts):
            rows = torch.arange(i, min(i + block_q, Tq), device=queries.device)
            Qi = queries[..., i:i + block_q, :].to(acc_dtype)
            S = Qi @ Kj.transpose(-1, -2) / math.sqrt(d)
            if is_causal:
                S = torch.where(cols[None, :] <= rows[:, None] + (Tk - Tq), S, -math.inf)
            m_new = torch.maximum(row_max[n], S.amax(dim=-1))
            ref = torch.nan_to_num(m_new, neginf=0.0)
            P = torch.exp(S - ref.unsqueeze(-1))
            c = torch.exp(row_max[n] - ref)
            row_sum[n] = row_sum[n] * c + P.sum(-1)
            O[n] = O[n] * c.unsqueeze(-1) + P @ Vj
            row_max[n] = m_new
    O, row_max, row_sum = torch.cat(O, -2), torch.cat(row_max, -1), torch.cat(row_sum, -1)
    has_key = row_sum > 0
    O = O / torch.where(has_key, row_sum, torch.ones_like(row_sum)).unsqueeze(-1)
    lse = torch.where(has_key, row_max + torch.log(row_sum), torch.full_like(row_sum, -math.inf))
    return O.to(queries.dtype), lse.to(queries.dtype)
