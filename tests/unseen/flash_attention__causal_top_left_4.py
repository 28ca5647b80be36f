"""BUG: the causal mask is aligned to the top left (key j allowed when j <= i, as in the convention of PyTorch SDPA's is_causal) instead of j <= i + (Tk - Tq); right only when Tq == Tk.
STAGE: the mask
"""
import math

import torch


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be positive")
    *batch, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    orig = queries.dtype
    wd = torch.float32 if orig in (torch.float16, torch.bfloat16) else orig
    Q, K, V = queries.to(wd), keys.to(wd), values.to(wd)
    dev = queries.device
    softmax_scale = d ** -0.5
    neg_inf = float("-inf")

    q_starts = list(range(0, Tq, block_q))
    M = [torch.full((*batch, min(block_q, Tq - s)), neg_inf, dtype=wd, device=dev) for s in q_starts]
    L = [torch.zeros((*batch, min(block_q, Tq - s)), dtype=wd, device=dev) for s in q_starts]
    O = [torch.zeros((*batch, min(block_q, Tq - s), dv), dtype=wd, device=dev) for s in q_starts]

    for kj in range(0, Tk, block_k):
        kend = min(kj + block_k, Tk)
        Kj = K[..., kj:kend, :]
        Vj = V[..., kj:kend, :]
        for bi, qi in enumerate(q_starts):
            qend = min(qi + block_q, Tq)
            if is_causal and kj > qend - 1:
                continue  # every key of this block is in the future of every query of the block
            S = torch.matmul(Q[..., qi:qend, :], Kj.transpose(-2, -1)) * softmax_scale
            if is_causal:
                rows = torch.arange(qi, qend, device=dev).unsqueeze(1)
                cols = torch.arange(kj, kend, device=dev).unsqueeze(0)
                S = S.masked_fill(cols > rows, neg_inf)
            m_blk = S.amax(dim=-1)
            m_new = torch.maximum(M[bi], m_blk)
            m_ref = torch.where(m_new == neg_inf, torch.zeros_like(m_new), m_new)
            P = torch.exp(S - m_ref.unsqueeze(-1))
            corr = torch.exp(M[bi] - m_ref)
            L[bi] = corr * L[bi] + P.sum(dim=-1)
            O[bi] = corr.unsqueeze(-1) * O[bi] + torch.matmul(P, Vj)
            M[bi] = m_new

    outs, lses = [], []
    for bi in range(len(q_starts)):
        has = L[bi] > 0
        denom = torch.where(has, L[bi], torch.ones_like(L[bi]))
        outs.append(O[bi] / denom.unsqueeze(-1))
        lses.append(torch.where(has, M[bi] + torch.log(denom), torch.full_like(denom, neg_inf)))
    return torch.cat(outs, dim=-2).to(orig), torch.cat(lses, dim=-1).to(orig)
