"""FlashAttention backward in Triton: one program per query block, dK/dV stored, not accumulated (a bug).

Design: a small pre-pass kernel computes delta = rowsum(dO * O) per query row. The main kernel runs
on a (cdiv(Tq, BLOCK_M), B * H) grid; each program loads its query tile, dO tile, lse and delta once,
then walks the key blocks of BLOCK_N keys (under causal masking only those up to the block's last
diagonal), recomputing P = exp(q k^T * scale - lse). dQ stays in registers and is written with a
plain store at the end; each program's share of dK = dS^T q * scale and dV = P^T dO is added with
tl.atomic_add into zero-initialised float32 buffers (float64 for float64 inputs), which the
launcher casts to the input dtype only when it differs. Rows whose lse is -inf have no allowed key
and contribute nothing.

BUG: each program stores its share of dK and dV with tl.store instead of tl.atomic_add: every query block
overwrites the rows the one before it wrote, so dK and dV hold the last query block's share alone (the atomics
were taken out of the correct query-parallel file). Departs at dK and dV; dQ is right.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _bwd_preprocess_kernel(
    Out, DO, Delta,
    stride_ob, stride_oh, stride_om,
    seqlen_q, nheads,
    BLOCK_M: tl.constexpr, HEADDIM: tl.constexpr, ACC_TYPE: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_hb = tl.program_id(1)
    off_b = off_hb // nheads
    off_h = off_hb % nheads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEADDIM)
    base = off_b * stride_ob + off_h * stride_oh
    ptrs = base + offs_m[:, None] * stride_om + offs_d[None, :]
    m_mask = offs_m < seqlen_q
    o = tl.load(Out + ptrs, mask=m_mask[:, None], other=0.0).to(ACC_TYPE)
    do = tl.load(DO + ptrs, mask=m_mask[:, None], other=0.0).to(ACC_TYPE)
    delta = tl.sum(o * do, axis=1)
    tl.store(Delta + off_hb * seqlen_q + offs_m, delta, mask=m_mask)


@triton.jit
def _bwd_kernel_query_parallel(
    Q, K, V, DO, LSE, Delta,
    DQ, DK, DV,
    softmax_scale,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    nheads, seqlen_q, seqlen_k,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEADDIM: tl.constexpr,
    ACC_TYPE: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_hb = tl.program_id(1)
    off_b = off_hb // nheads
    off_h = off_hb % nheads

    # move every pointer to this (batch, head)
    Q += off_b * stride_qb + off_h * stride_qh
    DO += off_b * stride_qb + off_h * stride_qh
    DQ += off_b * stride_qb + off_h * stride_qh
    K += off_b * stride_kb + off_h * stride_kh
    V += off_b * stride_kb + off_h * stride_kh
    DK += off_b * stride_kb + off_h * stride_kh
    DV += off_b * stride_kb + off_h * stride_kh
    LSE += off_hb * seqlen_q
    Delta += off_hb * seqlen_q

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEADDIM)
    m_mask = offs_m < seqlen_q

    # everything that belongs to the query block is loaded exactly once
    q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :], mask=m_mask[:, None], other=0.0)
    do = tl.load(DO + offs_m[:, None] * stride_qm + offs_d[None, :], mask=m_mask[:, None], other=0.0)
    lse = tl.load(LSE + offs_m, mask=m_mask, other=float("-inf"))
    delta = tl.load(Delta + offs_m, mask=m_mask, other=0.0)

    # a row with lse == -inf has no allowed key: keep it out of every exp(),
    # otherwise we would get exp(-inf - (-inf)) = nan
    row_ok = m_mask & (lse != float("-inf"))
    lse = tl.where(row_ok, lse, 0.0)

    dq = tl.zeros([BLOCK_M, HEADDIM], dtype=ACC_TYPE)

    # causal: key j is allowed for query i when j <= i + (seqlen_k - seqlen_q)
    if IS_CAUSAL:
        end_n = tl.minimum((start_m + 1) * BLOCK_M + seqlen_k - seqlen_q, seqlen_k)
    else:
        end_n = seqlen_k

    for start_n in range(0, end_n, BLOCK_N):
        cur_n = start_n + offs_n
        n_mask = cur_n < seqlen_k
        k = tl.load(K + cur_n[:, None] * stride_kn + offs_d[None, :], mask=n_mask[:, None], other=0.0)
        v = tl.load(V + cur_n[:, None] * stride_kn + offs_d[None, :], mask=n_mask[:, None], other=0.0)

        qk = tl.dot(q, tl.trans(k)) * softmax_scale
        valid = row_ok[:, None] & n_mask[None, :]
        if IS_CAUSAL:
            valid = valid & (cur_n[None, :] <= offs_m[:, None] + (seqlen_k - seqlen_q))
        qk = tl.where(valid, qk, float("-inf"))
        p = tl.exp(qk - lse[:, None])

        # dV_j += P_ij^T dO_i
        dv_part = tl.dot(tl.trans(p.to(do.dtype)), do)
        # dP = dO V^T ; dS = P * (dP - delta)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        ds_in = ds.to(q.dtype)
        dq += tl.dot(ds_in, k)
        dk_part = tl.dot(tl.trans(ds_in), q) * softmax_scale

        tl.store(DV + cur_n[:, None] * stride_kn + offs_d[None, :], dv_part.to(ACC_TYPE),
                      mask=n_mask[:, None])
        tl.store(DK + cur_n[:, None] * stride_kn + offs_d[None, :], dk_part.to(ACC_TYPE),
                      mask=n_mask[:, None])

    dq = dq * softmax_scale
    tl.store(DQ + offs_m[:, None] * stride_qm + offs_d[None, :], dq.to(DQ.dtype.element_ty),
             mask=m_mask[:, None])


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    for name, blk in (("BLOCK_M", BLOCK_M), ("BLOCK_N", BLOCK_N)):
        if not isinstance(blk, int) or blk < 16 or blk & (blk - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {blk!r}")
    batch, nheads, seqlen_q, d = q.shape
    seqlen_k = k.shape[2]
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dimension must be 16, 32, 64 or 128, got {d}")
    if k.shape != (batch, nheads, seqlen_k, d) or v.shape != k.shape:
        raise ValueError("k and v must have shape (B, H, Tk, d)")
    if o.shape != q.shape or do.shape != q.shape:
        raise ValueError("o and do must have q's shape")
    if lse.shape != (batch, nheads, seqlen_q):
        raise ValueError("lse must have shape (B, H, Tq)")

    if q.dtype == torch.float64:
        acc_torch, acc_tl = torch.float64, tl.float64
    else:
        acc_torch, acc_tl = torch.float32, tl.float32
    softmax_scale = 1.0 / math.sqrt(d)

    delta = torch.empty((batch, nheads, seqlen_q), device=q.device, dtype=acc_torch)
    dq = torch.empty_like(q)
    dk_accum = torch.zeros((batch, nheads, seqlen_k, d), device=q.device, dtype=acc_torch)
    dv_accum = torch.zeros((batch, nheads, seqlen_k, d), device=q.device, dtype=acc_torch)

    grid = (triton.cdiv(seqlen_q, BLOCK_M), batch * nheads)
    _bwd_preprocess_kernel[grid](
        o, do, delta,
        o.stride(0), o.stride(1), o.stride(2),
        seqlen_q, nheads,
        BLOCK_M=BLOCK_M, HEADDIM=d, ACC_TYPE=acc_tl,
    )
    _bwd_kernel_query_parallel[grid](
        q, k, v, do, lse, delta,
        dq, dk_accum, dv_accum,
        softmax_scale,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        nheads, seqlen_q, seqlen_k,
        IS_CAUSAL=bool(is_causal),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEADDIM=d,
        ACC_TYPE=acc_tl,
        num_warps=8,
    )
    dk = dk_accum if k.dtype == acc_torch else dk_accum.to(k.dtype)
    dv = dv_accum if v.dtype == acc_torch else dv_accum.to(v.dtype)
    return dq, dk, dv
