"""STYLE: naive tiled FlashAttention tutorial (tril mask per tile, block skipping by block index)
BUG: the causal mask is built from the in-block indices (a lower-triangular tile) instead of the absolute query/key positions, so earlier key blocks of a query block are masked as if they were the diagonal block.
STAGE: block scores
WHEN: is_causal with more than one block (Tq > block_q or Tk > block_k); a single tile is right
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be at least 1")
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    scale = 1 / math.sqrt(d)
    work = torch.float32 if queries.dtype in (torch.float16, torch.bfloat16) else queries.dtype
    shift = Tk - Tq

    O, LSE = [], []
    for qs in range(0, Tq, block_q):
        Qb = queries[..., qs:qs + block_q, :].to(work)
        nq = Qb.shape[-2]
        m = torch.full(Qb.shape[:-1], -math.inf, dtype=work, device=Qb.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*Qb.shape[:-1], dv, dtype=work, device=Qb.device)
        last_key = qs + nq - 1 + shift if is_causal else Tk - 1
        for ks in range(0, min(Tk, last_key + 1), block_k):
            Kb = keys[..., ks:ks + block_k, :].to(work)
            Vb = values[..., ks:ks + block_k, :].to(work)
            nk = Kb.shape[-2]
            S = (Qb @ Kb.transpose(-2, -1)) * scale
            if is_causal:
                tile = torch.ones(nq, nk, dtype=torch.bool, device=Qb.device).tril(shift)
                S = S.masked_fill(~tile, -math.inf)
            m_new = torch.maximum(m, S.amax(-1))
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            P = torch.exp(S - m_safe[..., None])
            c = torch.exp(m - m_safe)
            l = l * c + P.sum(-1)
            acc = acc * c[..., None] + P @ Vb
            m = m_new
        ok = l > 0
        l1 = torch.where(ok, l, torch.ones_like(l))
        O.append(acc / l1[..., None])
        LSE.append(torch.where(ok, m + torch.log(l1), torch.full_like(m, -math.inf)))
    return torch.cat(O, -2).to(queries.dtype), torch.cat(LSE, -1).to(queries.dtype)
