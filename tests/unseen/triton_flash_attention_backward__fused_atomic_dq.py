"""BUG: none
STYLE: Tri Dao's flash_attn_triton style: a do*o pre-pass for delta, then one fused program per key block that loops over query blocks, keeps dK/dV in registers and adds dQ with tl.atomic_add into a zeroed accumulation buffer.
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _bwd_preprocess_do_o_dot(Out, DO, Delta, seqlen_q, BLOCK_M: tl.constexpr, BLOCK_HEADDIM: tl.constexpr):
    start_m = tl.program_id(0)
    off_hb = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_HEADDIM)
    ptr_off = off_hb * seqlen_q * BLOCK_HEADDIM + offs_m[:, None] * BLOCK_HEADDIM + offs_d[None, :]
    o = tl.load(Out + ptr_off, mask=offs_m[:, None] < seqlen_q, other=0.0).to(Delta.dtype.element_ty)
    do = tl.load(DO + ptr_off, mask=offs_m[:, None] < seqlen_q, other=0.0).to(Delta.dtype.element_ty)
    delta = tl.sum(o * do, axis=1)
    tl.store(Delta + off_hb * seqlen_q + offs_m, delta, mask=offs_m < seqlen_q)


@triton.jit
def _bwd_kernel_one_col_block(
    Q, K, V, DO, DQ, DK, DV, LSE, D,
    softmax_scale,
    seqlen_q, seqlen_k,
    IS_CAUSAL: tl.constexpr,
    BLOCK_HEADDIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ACC_TYPE: tl.constexpr,
):
    start_n = tl.program_id(0)
    off_hb = tl.program_id(1)
    q_off = off_hb * seqlen_q * BLOCK_HEADDIM
    k_off = off_hb * seqlen_k * BLOCK_HEADDIM

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m_base = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_HEADDIM)
    n_ok = offs_n < seqlen_k

    k = tl.load(K + k_off + offs_n[:, None] * BLOCK_HEADDIM + offs_d[None, :], mask=n_ok[:, None], other=0.0)
    v = tl.load(V + k_off + offs_n[:, None] * BLOCK_HEADDIM + offs_d[None, :], mask=n_ok[:, None], other=0.0)
    dv = tl.zeros([BLOCK_N, BLOCK_HEADDIM], dtype=ACC_TYPE)
    dk = tl.zeros([BLOCK_N, BLOCK_HEADDIM], dtype=ACC_TYPE)

    diag = seqlen_k - seqlen_q
    # causal (bottom-right): query i needs key j iff i >= j - diag; skip query blocks entirely before that
    begin_m = 0
    if IS_CAUSAL:
        begin_m = (tl.maximum(start_n * BLOCK_N - diag, 0) // BLOCK_M) * BLOCK_M
    num_block_m = tl.cdiv(seqlen_q, BLOCK_M)
    for start_m in range(begin_m, num_block_m * BLOCK_M, BLOCK_M):
        offs_m = start_m + offs_m_base
        m_ok = offs_m < seqlen_q
        q = tl.load(Q + q_off + offs_m[:, None] * BLOCK_HEADDIM + offs_d[None, :], mask=m_ok[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k), out_dtype=ACC_TYPE)
        lse_i = tl.load(LSE + off_hb * seqlen_q + offs_m, mask=m_ok, other=float("-inf"))
        valid = m_ok[:, None] & n_ok[None, :] & (lse_i[:, None] > float("-inf"))
        if IS_CAUSAL:
            valid = valid & (offs_m[:, None] + diag >= offs_n[None, :])
        p = tl.exp(tl.where(valid, qk * softmax_scale - lse_i[:, None], float("-inf")))
        do = tl.load(DO + q_off + offs_m[:, None] * BLOCK_HEADDIM + offs_d[None, :], mask=m_ok[:, None], other=0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, out_dtype=ACC_TYPE)
        dp = tl.dot(do, tl.trans(v), out_dtype=ACC_TYPE)
        Di = tl.load(D + off_hb * seqlen_q + offs_m, mask=m_ok, other=0.0)
        ds = p * (dp - Di[:, None]) * softmax_scale
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, out_dtype=ACC_TYPE)
        dq = tl.dot(ds.to(k.dtype), k, out_dtype=ACC_TYPE)
        tl.atomic_add(DQ + q_off + offs_m[:, None] * BLOCK_HEADDIM + offs_d[None, :], dq, mask=m_ok[:, None])

    tl.store(DV + k_off + offs_n[:, None] * BLOCK_HEADDIM + offs_d[None, :], dv.to(DV.dtype.element_ty),
             mask=n_ok[:, None])
    tl.store(DK + k_off + offs_n[:, None] * BLOCK_HEADDIM + offs_d[None, :], dk.to(DK.dtype.element_ty),
             mask=n_ok[:, None])


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    for blk in (BLOCK_M, BLOCK_N):
        if type(blk) is not int or blk < 16 or blk & (blk - 1) != 0:
            raise ValueError(f"BLOCK_M and BLOCK_N must be powers of two >= 16, got {BLOCK_M} and {BLOCK_N}")
    batch, nheads, seqlen_q, d = q.shape
    seqlen_k = k.shape[2]
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dim {d} not supported")
    q, k, v, o, do, lse = [x.contiguous() for x in (q, k, v, o, do, lse)]
    softmax_scale = 1.0 / math.sqrt(d)
    acc_torch = torch.float64 if q.dtype == torch.float64 else torch.float32
    acc_tl = tl.float64 if q.dtype == torch.float64 else tl.float32

    delta = torch.empty((batch, nheads, seqlen_q), device=q.device, dtype=acc_torch)
    dq_accum = torch.zeros((batch, nheads, seqlen_q, d), device=q.device, dtype=acc_torch)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)

    _bwd_preprocess_do_o_dot[(triton.cdiv(seqlen_q, BLOCK_M), batch * nheads)](
        o, do, delta, seqlen_q, BLOCK_M=BLOCK_M, BLOCK_HEADDIM=d)
    _bwd_kernel_one_col_block[(triton.cdiv(seqlen_k, BLOCK_N), batch * nheads)](
        q, k, v, do, dq_accum, dk, dv, lse, delta,
        softmax_scale, seqlen_q, seqlen_k,
        IS_CAUSAL=bool(is_causal), BLOCK_HEADDIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, ACC_TYPE=acc_tl,
        num_warps=8 if d > 64 else 4, num_stages=1)
    dq = dq_accum if dq_accum.dtype == q.dtype else dq_accum.to(q.dtype)
    return dq, dk, dv
