"""STYLE: Triton "fused attention" tutorial (_attn_fwd_inner with offs_m/offs_n, m_i/l_i/acc, lo/hi causal bounds) ported to torch loops
BUG: The causal key range stops at hi = start_m + BLOCK_M as in the tutorial (which assumes Tq == Tk), ignoring the Tk - Tq shift, so keys a bottom-right-aligned query may see beyond that bound are never visited.
STAGE: block scores
WHEN: is_causal=True with Tq < Tk and some query block ending before Tk (q0 + block_q < Tk), e.g. Tq=60, Tk=100 with the default blocks or Tq=3, Tk=10 with block_q=2 (Tq >= Tk is right).
"""
import torch


def _attn_fwd_inner(acc, l_i, m_i, q, K, V, start_m, offs_m, lo, hi, BLOCK_N, sm_scale, causal, shift):
    for start_n in range(lo, hi, BLOCK_N):
        k = K[..., start_n:min(start_n + BLOCK_N, hi), :]
        v = V[..., start_n:min(start_n + BLOCK_N, hi), :]
        offs_n = torch.arange(start_n, start_n + k.shape[-2], device=q.device)
        qk = (q @ k.transpose(-2, -1)) * sm_scale
        if causal:
            mask = offs_m[:, None] + shift >= offs_n[None, :]
            qk = qk.masked_fill(~mask, float("-inf"))
        m_ij = torch.maximum(m_i, qk.amax(-1))
        m_ij_safe = torch.where(torch.isinf(m_ij), torch.zeros_like(m_ij), m_ij)
        p = torch.exp(qk - m_ij_safe[..., None])
        l_ij = p.sum(-1)
        alpha = torch.exp(m_i - m_ij_safe)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[..., None] + p @ v
        m_i = m_ij
    return acc, l_i, m_i


def flash_attention(queries, keys, values, is_causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("BLOCK_M and BLOCK_N must be >= 1")
    BLOCK_M, BLOCK_N = block_q, block_k
    N_CTX_Q, HEAD_DIM = queries.shape[-2], queries.shape[-1]
    N_CTX_K = keys.shape[-2]
    sm_scale = HEAD_DIM ** -0.5
    dt = queries.dtype if queries.dtype in (torch.float32, torch.float64) else torch.float32
    K, V = keys.to(dt), values.to(dt)
    shift = N_CTX_K - N_CTX_Q
    outs, lses = [], []
    for start_m in range(0, N_CTX_Q, BLOCK_M):
        q = queries[..., start_m:start_m + BLOCK_M, :].to(dt)
        offs_m = torch.arange(start_m, start_m + q.shape[-2], device=q.device)
        m_i = torch.full(q.shape[:-1], float("-inf"), dtype=dt, device=q.device)
        l_i = torch.zeros(q.shape[:-1], dtype=dt, device=q.device)
        acc = torch.zeros(*q.shape[:-1], values.shape[-1], dtype=dt, device=q.device)
        if is_causal:
            lo, hi = 0, min(start_m + BLOCK_M, N_CTX_K)
        else:
            lo, hi = 0, N_CTX_K
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K, V, start_m, offs_m, lo, hi, BLOCK_N, sm_scale,
                                        is_causal, shift)
        empty = l_i == 0
        m_i = torch.where(empty, torch.full_like(m_i, float("-inf")), m_i + torch.log(torch.where(empty, 1.0, l_i)))
        acc = acc / torch.where(empty, 1.0, l_i)[..., None]
        outs.append(acc)
        lses.append(m_i)
    return torch.cat(outs, -2).to(queries.dtype), torch.cat(lses, -1).to(queries.dtype)
