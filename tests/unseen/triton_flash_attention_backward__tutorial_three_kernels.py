"""BUG: none
STYLE: the Triton tutorial's backward layout: a preprocess kernel for delta = rowsum(dO * O), a key-block-parallel dK/dV kernel (transposed tiles, exp2 with log2(e) folded in, lse converted to base 2 in-kernel) and a query-block-parallel dQ kernel.
"""
import math

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634


@triton.jit
def _attn_bwd_preprocess(O, DO, Delta, N_CTX, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hz = tl.program_id(1)
    off_n = tl.arange(0, HEAD_DIM)
    rmask = off_m < N_CTX
    base = off_hz * N_CTX * HEAD_DIM
    o = tl.load(O + base + off_m[:, None] * HEAD_DIM + off_n[None, :], mask=rmask[:, None], other=0.0)
    do = tl.load(DO + base + off_m[:, None] * HEAD_DIM + off_n[None, :], mask=rmask[:, None], other=0.0)
    delta = tl.sum(o.to(Delta.dtype.element_ty) * do.to(Delta.dtype.element_ty), axis=1)
    tl.store(Delta + off_hz * N_CTX + off_m, delta, mask=rmask)


@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV,
                   sm_scale, qk_scale, N_Q, N_KV,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                   CAUSAL: tl.constexpr, ACC: tl.constexpr):
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    Q += bh * N_Q * HEAD_DIM
    DO += bh * N_Q * HEAD_DIM
    LSE += bh * N_Q
    Delta += bh * N_Q
    K += bh * N_KV * HEAD_DIM
    V += bh * N_KV * HEAD_DIM
    DK += bh * N_KV * HEAD_DIM
    DV += bh * N_KV * HEAD_DIM

    start_n = pid_n * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, HEAD_DIM)
    nmask = offs_n < N_KV
    k = tl.load(K + offs_n[:, None] * HEAD_DIM + offs_k[None, :], mask=nmask[:, None], other=0.0)
    v = tl.load(V + offs_n[:, None] * HEAD_DIM + offs_k[None, :], mask=nmask[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=ACC)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=ACC)

    shift = N_KV - N_Q
    if CAUSAL:
        # the first query that sees key start_n is start_n - shift (bottom-right alignment)
        first_q = tl.maximum(start_n - shift, 0)
        lo = (first_q // BLOCK_M) * BLOCK_M
    else:
        lo = 0
    for start_m in range(lo, N_Q, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        mmask = offs_m < N_Q
        qT = tl.load(Q + offs_m[None, :] * HEAD_DIM + offs_k[:, None], mask=mmask[None, :], other=0.0)
        lse = tl.load(LSE + offs_m, mask=mmask, other=0.0)
        # base-2 lse; a row with no allowed key (lse = -inf) gets +inf so its probabilities are exactly 0
        m2 = tl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
        qkT = tl.dot(k, qT, out_dtype=ACC)
        keep = nmask[:, None] & mmask[None, :]
        if CAUSAL:
            keep = keep & (offs_n[:, None] <= offs_m[None, :] + shift)
        # mask before exp2 so masked scores never overflow
        pT = tl.math.exp2(tl.where(keep, qkT * qk_scale - m2[None, :], float("-inf")))
        do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_k[None, :], mask=mmask[:, None], other=0.0)
        dv += tl.dot(pT.to(do.dtype), do, out_dtype=ACC)
        Di = tl.load(Delta + offs_m, mask=mmask, other=0.0)
        dpT = tl.dot(v, tl.trans(do), out_dtype=ACC)
        dsT = pT * (dpT - Di[None, :])
        dk += tl.dot(dsT.to(qT.dtype), tl.trans(qT), out_dtype=ACC)

    dk *= sm_scale
    tl.store(DV + offs_n[:, None] * HEAD_DIM + offs_k[None, :], dv.to(DV.dtype.element_ty), mask=nmask[:, None])
    tl.store(DK + offs_n[:, None] * HEAD_DIM + offs_k[None, :], dk.to(DK.dtype.element_ty), mask=nmask[:, None])


@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, Delta, DQ,
                 sm_scale, qk_scale, N_Q, N_KV,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                 CAUSAL: tl.constexpr, ACC: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    Q += bh * N_Q * HEAD_DIM
    DO += bh * N_Q * HEAD_DIM
    DQ += bh * N_Q * HEAD_DIM
    LSE += bh * N_Q
    Delta += bh * N_Q
    K += bh * N_KV * HEAD_DIM
    V += bh * N_KV * HEAD_DIM

    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, HEAD_DIM)
    mmask = offs_m < N_Q
    q = tl.load(Q + offs_m[:, None] * HEAD_DIM + offs_k[None, :], mask=mmask[:, None], other=0.0)
    do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_k[None, :], mask=mmask[:, None], other=0.0)
    lse = tl.load(LSE + offs_m, mask=mmask, other=0.0)
    m2 = tl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
    Di = tl.load(Delta + offs_m, mask=mmask, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=ACC)

    shift = N_KV - N_Q
    if CAUSAL:
        hi = tl.maximum(tl.minimum(N_KV, tl.minimum(start_m + BLOCK_M, N_Q) + shift), 0)
    else:
        hi = N_KV
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        nmask = offs_n < N_KV
        kT = tl.load(K + offs_n[None, :] * HEAD_DIM + offs_k[:, None], mask=nmask[None, :], other=0.0)
        vT = tl.load(V + offs_n[None, :] * HEAD_DIM + offs_k[:, None], mask=nmask[None, :], other=0.0)
        qk = tl.dot(q, kT, out_dtype=ACC)
        keep = mmask[:, None] & nmask[None, :]
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None] + shift)
        p = tl.math.exp2(tl.where(keep, qk * qk_scale - m2[:, None], float("-inf")))
        dp = tl.dot(do, vT, out_dtype=ACC)
        ds = p * (dp - Di[:, None])
        dq += tl.dot(ds.to(kT.dtype), tl.trans(kT), out_dtype=ACC)
    dq *= sm_scale
    tl.store(DQ + offs_m[:, None] * HEAD_DIM + offs_k[None, :], dq.to(DQ.dtype.element_ty), mask=mmask[:, None])


def _pow2_at_least_16(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 16 and (x & (x - 1)) == 0


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not (_pow2_at_least_16(BLOCK_M) and _pow2_at_least_16(BLOCK_N)):
        raise ValueError(f"BLOCK_M/BLOCK_N must be powers of two >= 16, got {BLOCK_M}/{BLOCK_N}")
    B, H, N_Q, HEAD_DIM = q.shape
    N_KV = k.shape[2]
    if HEAD_DIM not in (16, 32, 64, 128):
        raise ValueError(f"HEAD_DIM={HEAD_DIM} not supported")
    q, k, v, o, do, lse = (t.contiguous() for t in (q, k, v, o, do, lse))
    acc = tl.float64 if q.dtype == torch.float64 else tl.float32
    sm_scale = 1.0 / math.sqrt(HEAD_DIM)
    qk_scale = sm_scale * _LOG2E

    delta = torch.empty((B, H, N_Q), device=q.device, dtype=lse.dtype)
    dq = torch.empty_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)

    PRE_BLOCK = 32
    _attn_bwd_preprocess[(triton.cdiv(N_Q, PRE_BLOCK), B * H)](o, do, delta, N_Q,
                                                              BLOCK_M=PRE_BLOCK, HEAD_DIM=HEAD_DIM)
    _attn_bwd_dkdv[(triton.cdiv(N_KV, BLOCK_N), B * H)](
        q, k, v, do, lse, delta, dk, dv, sm_scale, qk_scale, N_Q, N_KV,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM, CAUSAL=bool(is_causal), ACC=acc,
        num_warps=8 if BLOCK_N * HEAD_DIM >= 64 * 64 else 4, num_stages=1)
    _attn_bwd_dq[(triton.cdiv(N_Q, BLOCK_M), B * H)](
        q, k, v, do, lse, delta, dq, sm_scale, qk_scale, N_Q, N_KV,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM, CAUSAL=bool(is_causal), ACC=acc,
        num_warps=4, num_stages=1)
    return dq, dk, dv
