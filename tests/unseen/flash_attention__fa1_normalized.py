"""STYLE: FlashAttention (v1) paper, Algorithm 1: O kept normalised, per-block m~, l~, P~ merged with diag(l_new)^-1 updates
BUG: none
STAGE: none
WHEN: never (correct on every contract input)
"""
import math

import torch


def _neg_inf_safe(m):
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def _safe_div(x, y):
    return x / torch.where(y > 0, y, torch.ones_like(y))


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1 (got block_q={block_q}, block_k={block_k})")
    N, d = queries.shape[-2:]
    M, dv = keys.shape[-2], values.shape[-1]
    tau = 1.0 / math.sqrt(d)
    dt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    dev = queries.device
    O_all, L_all = [], []
    for i0 in range(0, N, block_q):
        Qi = queries[..., i0:i0 + block_q, :].to(dt)
        br = Qi.shape[-2]
        Oi = torch.zeros(*Qi.shape[:-1], dv, dtype=dt, device=dev)
        li = torch.zeros(Qi.shape[:-1], dtype=dt, device=dev)
        mi = torch.full(Qi.shape[:-1], -math.inf, dtype=dt, device=dev)
        row = torch.arange(i0, i0 + br, device=dev)
        for j0 in range(0, M, block_k):
            if is_causal and j0 > i0 + br - 1 + (M - N):
                break
            Kj = keys[..., j0:j0 + block_k, :].to(dt)
            Vj = values[..., j0:j0 + block_k, :].to(dt)
            Sij = tau * (Qi @ Kj.transpose(-2, -1))
            if is_causal:
                col = torch.arange(j0, j0 + Kj.shape[-2], device=dev)
                Sij = Sij.masked_fill(col[None, :] > row[:, None] + (M - N), -math.inf)
            m_tilde = Sij.amax(-1)
            P_tilde = torch.exp(Sij - _neg_inf_safe(m_tilde)[..., None])
            l_tilde = P_tilde.sum(-1)
            m_new = torch.maximum(mi, m_tilde)
            m_ref = _neg_inf_safe(m_new)
            a = torch.exp(mi - m_ref) * li
            b = torch.exp(m_tilde - m_ref)
            l_new = a + b * l_tilde
            Oi = _safe_div(a[..., None] * Oi + b[..., None] * (P_tilde @ Vj), l_new[..., None])
            li, mi = l_new, m_new
        Li = torch.where(li > 0, mi + torch.log(torch.where(li > 0, li, torch.ones_like(li))),
                         torch.full_like(mi, -math.inf))
        O_all.append(Oi)
        L_all.append(Li)
    return torch.cat(O_all, dim=-2).to(queries.dtype), torch.cat(L_all, dim=-1).to(queries.dtype)
