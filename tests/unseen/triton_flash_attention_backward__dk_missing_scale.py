"""BUG: three launches (delta pre-pass, key-parallel dK/dV, query-parallel dQ) with shared @triton.jit helpers; dQ is multiplied by the softmax scale but dK = dS^T q is stored without the 1/sqrt(d) factor (off by sqrt(d)).
STAGE: dK
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _tile_ptrs(base, rows, cols, stride_row):
    return base + rows[:, None] * stride_row + cols[None, :]


@triton.jit
def _probs(q, k, lse, rows, cols, n_q, n_k, scale, CAUSAL: tl.constexpr, ACC: tl.constexpr):
    """P tile (BLOCK_M x BLOCK_N) recomputed from lse; zero outside the allowed keys and on rows with lse = -inf."""
    s = tl.dot(q, tl.trans(k), out_dtype=ACC) * scale
    ok = (rows[:, None] < n_q) & (cols[None, :] < n_k) & (lse[:, None] != float("-inf"))
    if CAUSAL:
        ok = ok & (cols[None, :] <= rows[:, None] + (n_k - n_q))
    return tl.where(ok, tl.exp(s - lse[:, None]), 0.0)


@triton.jit
def _delta_pre(O, DO, DELTA, n_q, s_b, s_h, s_t, H, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    rm = rows[:, None] < n_q
    o = tl.load(_tile_ptrs(O + b * s_b + h * s_h, rows, dims, s_t), mask=rm, other=0.0)
    do = tl.load(_tile_ptrs(DO + b * s_b + h * s_h, rows, dims, s_t), mask=rm, other=0.0)
    acc = tl.sum(o.to(DELTA.dtype.element_ty) * do.to(DELTA.dtype.element_ty), axis=1)
    tl.store(DELTA + bh * n_q + rows, acc, mask=rows < n_q)


@triton.jit
def _dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, scale, n_q, n_k, H,
          sq_b, sq_h, sq_t, sk_b, sk_h, sk_t,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
          CAUSAL: tl.constexpr, ACC: tl.constexpr):
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    q_base = Q + b * sq_b + h * sq_h
    do_base = DO + b * sq_b + h * sq_h
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    cm = cols[:, None] < n_k
    k = tl.load(_tile_ptrs(K + b * sk_b + h * sk_h, cols, dims, sk_t), mask=cm, other=0.0)
    v = tl.load(_tile_ptrs(V + b * sk_b + h * sk_h, cols, dims, sk_t), mask=cm, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], ACC)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], ACC)

    m_lo = 0
    if CAUSAL:
        # earliest query that can see this key block (bottom-right aligned)
        m_lo = tl.maximum(pid_n * BLOCK_N - (n_k - n_q), 0) // BLOCK_M * BLOCK_M
    for m0 in range(m_lo, n_q, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        rm = rows < n_q
        q = tl.load(_tile_ptrs(q_base, rows, dims, sq_t), mask=rm[:, None], other=0.0)
        do = tl.load(_tile_ptrs(do_base, rows, dims, sq_t), mask=rm[:, None], other=0.0)
        lse = tl.load(LSE + bh * n_q + rows, mask=rm, other=0.0)
        delta = tl.load(DELTA + bh * n_q + rows, mask=rm, other=0.0)
        p = _probs(q, k, lse, rows, cols, n_q, n_k, scale, CAUSAL, ACC)
        dv += tl.dot(tl.trans(p).to(do.dtype), do, out_dtype=ACC)
        dp = tl.dot(do, tl.trans(v), out_dtype=ACC)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q, out_dtype=ACC)

    tl.store(_tile_ptrs(DK + b * sk_b + h * sk_h, cols, dims, sk_t), dk.to(DK.dtype.element_ty), mask=cm)
    tl.store(_tile_ptrs(DV + b * sk_b + h * sk_h, cols, dims, sk_t), dv.to(DV.dtype.element_ty), mask=cm)


@triton.jit
def _dq(Q, K, V, DO, LSE, DELTA, DQ, scale, n_q, n_k, H,
        sq_b, sq_h, sq_t, sk_b, sk_h, sk_t,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
        CAUSAL: tl.constexpr, ACC: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    rm = rows < n_q
    q = tl.load(_tile_ptrs(Q + b * sq_b + h * sq_h, rows, dims, sq_t), mask=rm[:, None], other=0.0)
    do = tl.load(_tile_ptrs(DO + b * sq_b + h * sq_h, rows, dims, sq_t), mask=rm[:, None], other=0.0)
    lse = tl.load(LSE + bh * n_q + rows, mask=rm, other=0.0)
    delta = tl.load(DELTA + bh * n_q + rows, mask=rm, other=0.0)
    k_base = K + b * sk_b + h * sk_h
    v_base = V + b * sk_b + h * sk_h
    dq = tl.zeros([BLOCK_M, HEAD_DIM], ACC)

    n_hi = n_k
    if CAUSAL:
        n_hi = tl.maximum(tl.minimum(n_k, tl.minimum(pid_m * BLOCK_M + BLOCK_M, n_q) + (n_k - n_q)), 0)
    for n0 in range(0, n_hi, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        cm = cols[:, None] < n_k
        k = tl.load(_tile_ptrs(k_base, cols, dims, sk_t), mask=cm, other=0.0)
        v = tl.load(_tile_ptrs(v_base, cols, dims, sk_t), mask=cm, other=0.0)
        p = _probs(q, k, lse, rows, cols, n_q, n_k, scale, CAUSAL, ACC)
        dp = tl.dot(do, tl.trans(v), out_dtype=ACC)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, out_dtype=ACC)
    dq = dq * scale
    tl.store(_tile_ptrs(DQ + b * sq_b + h * sq_h, rows, dims, sq_t), dq.to(DQ.dtype.element_ty), mask=rm[:, None])


def _check(name, val):
    if isinstance(val, bool) or not isinstance(val, int) or val < 16 or val & (val - 1):
        raise ValueError(f"{name} must be a power of two >= 16, got {val!r}")


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    _check("BLOCK_M", BLOCK_M)
    _check("BLOCK_N", BLOCK_N)
    B, H, n_q, hd = q.shape
    n_k = k.shape[2]
    if hd not in (16, 32, 64, 128):
        raise ValueError(f"head dim {hd}: expected 16, 32, 64 or 128")
    q, k, v, o, do, lse = (t.contiguous() for t in (q, k, v, o, do, lse))
    scale = 1.0 / math.sqrt(hd)
    acc = tl.float64 if q.dtype == torch.float64 else tl.float32
    delta = torch.empty((B, H, n_q), dtype=lse.dtype, device=q.device)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    causal = bool(is_causal)

    _delta_pre[(triton.cdiv(n_q, BLOCK_M), B * H)](o, do, delta, n_q, o.stride(0), o.stride(1), o.stride(2), H,
                                                   BLOCK_M=BLOCK_M, HEAD_DIM=hd)
    common = dict(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=hd, CAUSAL=causal, ACC=acc)
    _dkdv[(triton.cdiv(n_k, BLOCK_N), B * H)](q, k, v, do, lse, delta, dk, dv, scale, n_q, n_k, H,
                                             q.stride(0), q.stride(1), q.stride(2),
                                             k.stride(0), k.stride(1), k.stride(2), **common)
    _dq[(triton.cdiv(n_q, BLOCK_M), B * H)](q, k, v, do, lse, delta, dq, scale, n_q, n_k, H,
                                           q.stride(0), q.stride(1), q.stride(2),
                                           k.stride(0), k.stride(1), k.stride(2), **common)
    return dq, dk, dv
