"""BUG: works in base 2 like Triton's tutorial (scores pre-multiplied by log2(e), exp2) and stores the tutorial's M = m_i + log2(l_i) as lse without converting back to natural log (multiply by ln 2); the output itself is right.
STAGE: the lse
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(Q, K, V, O, LSE, qk_scale, T_Q, T_K,
         D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, F: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    Q += pid_bh * T_Q * D
    K += pid_bh * T_K * D
    V += pid_bh * T_K * D
    O += pid_bh * T_Q * D
    LSE += pid_bh * T_Q

    q = tl.load(Q + rm[:, None] * D + rd[None, :], mask=rm[:, None] < T_Q, other=0.0)
    m_i = tl.full([BM], -float("inf"), F)
    l_i = tl.zeros([BM], F)
    acc = tl.zeros([BM, D], F)

    delta = T_K - T_Q
    hi = T_K
    if CAUSAL:
        hi = tl.maximum(tl.minimum(T_K, tl.minimum(pid_m * BM + BM, T_Q) + delta), 0)
    for start_n in range(0, hi, BN):
        cn = start_n + rn
        kt = tl.load(K + cn[None, :] * D + rd[:, None], mask=cn[None, :] < T_K, other=0.0)
        qk = tl.dot(q, kt, out_dtype=F) * qk_scale  # log2 domain
        allowed = cn[None, :] < T_K
        if CAUSAL:
            allowed = allowed & (cn[None, :] <= rm[:, None] + delta)
        qk = tl.where(allowed, qk, -float("inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        m_ok = tl.where(m_ij == -float("inf"), 0.0, m_ij)
        p = tl.math.exp2(qk - m_ok[:, None])
        alpha = tl.math.exp2(m_i - m_ok)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + cn[:, None] * D + rd[None, :], mask=cn[:, None] < T_K, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, out_dtype=F)
        m_i = m_ij

    empty = l_i == 0.0
    l_div = tl.where(empty, 1.0, l_i)
    acc = acc / l_div[:, None]
    m_i = tl.where(empty, -float("inf"), m_i + tl.math.log2(l_div))
    tl.store(LSE + rm, m_i, mask=rm < T_Q)
    tl.store(O + rm[:, None] * D + rd[None, :], acc.to(O.dtype.element_ty), mask=rm[:, None] < T_Q)


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    def pow2(x):
        return type(x) is int and x >= 16 and x & (x - 1) == 0
    if not (pow2(BLOCK_M) and pow2(BLOCK_N)):
        raise ValueError("BLOCK_M and BLOCK_N must be powers of two, at least 16")
    B, H, Tq, D = q.shape
    Tk = k.shape[-2]
    if D not in {16, 32, 64, 128}:
        raise ValueError("unsupported head dim")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    f64 = q.dtype == torch.float64
    lse = torch.empty(B, H, Tq, device=q.device, dtype=torch.float64 if f64 else torch.float32)
    qk_scale = (1.0 / math.sqrt(D)) * math.log2(math.e)
    _fwd[(triton.cdiv(Tq, BLOCK_M), B * H)](
        q, k, v, o, lse, qk_scale, Tq, Tk,
        D=D, BM=BLOCK_M, BN=BLOCK_N, CAUSAL=bool(is_causal), F=tl.float64 if f64 else tl.float32)
    return o, lse
