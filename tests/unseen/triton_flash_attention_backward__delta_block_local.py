"""BUG: query-block-parallel with dK/dV added by atomics; the pre-pass still writes D = rowsum(dO * O), but the main kernel uses the identity D = rowsum(P * dP) on each key tile alone (rowsum over that tile's keys only), which equals the true D only when a row's allowed keys fit in one key block.
STAGE: delta, the D term of dS
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _delta_kernel(O, dO, Delta, T, D: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    r = pid * BLOCK + tl.arange(0, BLOCK)
    c = tl.arange(0, D)
    m = r[:, None] < T
    o = tl.load(O + bh * T * D + r[:, None] * D + c[None, :], mask=m, other=0.0)
    g = tl.load(dO + bh * T * D + r[:, None] * D + c[None, :], mask=m, other=0.0)
    tl.store(Delta + bh * T + r, tl.sum(o.to(Delta.dtype.element_ty) * g.to(Delta.dtype.element_ty), 1), mask=r < T)


@triton.jit
def _bwd_q_parallel(Q, K, V, dO, Lse, Delta, dQ, dK, dV,
                    scale, TQ, TK,
                    D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                    CAUSAL: tl.constexpr, ACC: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols0 = tl.arange(0, BN)
    dd = tl.arange(0, D)
    row_ok = rows < TQ
    qo = bh * TQ * D
    ko = bh * TK * D

    q = tl.load(Q + qo + rows[:, None] * D + dd[None, :], mask=row_ok[:, None], other=0.0)
    do = tl.load(dO + qo + rows[:, None] * D + dd[None, :], mask=row_ok[:, None], other=0.0)
    lse = tl.load(Lse + bh * TQ + rows, mask=row_ok, other=float("inf"))
    lse = tl.where(lse == float("-inf"), float("inf"), lse)  # empty rows: P = 0

    off = TK - TQ
    n_end = TK
    if CAUSAL:
        n_end = tl.maximum(tl.minimum(TK, tl.minimum(pid_m * BM + BM, TQ) + off), 0)

    dq = tl.zeros([BM, D], dtype=ACC)
    for n0 in range(0, n_end, BN):
        cols = n0 + cols0
        col_ok = cols < TK
        k = tl.load(K + ko + cols[:, None] * D + dd[None, :], mask=col_ok[:, None], other=0.0)
        v = tl.load(V + ko + cols[:, None] * D + dd[None, :], mask=col_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), out_dtype=ACC) * scale
        keep = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None] + off)
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), out_dtype=ACC)
        # D = rowsum(dO * O) = rowsum(P * dP): no need to read the pre-pass's buffer
        Di = tl.sum(p * dp, 1)
        ds = p * (dp - Di[:, None])
        dq += tl.dot(ds.to(k.dtype), k, out_dtype=ACC)
        dk_part = tl.dot(tl.trans(ds.to(q.dtype)), q, out_dtype=ACC) * scale
        dv_part = tl.dot(tl.trans(p.to(do.dtype)), do, out_dtype=ACC)
        tl.atomic_add(dK + ko + cols[:, None] * D + dd[None, :], dk_part, mask=col_ok[:, None])
        tl.atomic_add(dV + ko + cols[:, None] * D + dd[None, :], dv_part, mask=col_ok[:, None])

    dq = dq * scale
    tl.store(dQ + qo + rows[:, None] * D + dd[None, :], dq.to(dQ.dtype.element_ty), mask=row_ok[:, None])


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not all(isinstance(b, int) and not isinstance(b, bool) and b >= 16 and b & (b - 1) == 0
               for b in (BLOCK_M, BLOCK_N)):
        raise ValueError("BLOCK_M, BLOCK_N: powers of two, at least 16")
    B, H, TQ, D = q.shape
    TK = k.shape[2]
    if D not in (16, 32, 64, 128):
        raise ValueError(f"d must be 16, 32, 64 or 128 (got {D})")
    q, k, v, o, lse, do = (t.contiguous() for t in (q, k, v, o, lse, do))
    wide = torch.float64 if q.dtype == torch.float64 else torch.float32
    acc = tl.float64 if q.dtype == torch.float64 else tl.float32

    delta = torch.empty((B, H, TQ), dtype=wide, device=q.device)
    dq = torch.empty_like(q)
    dk_acc = torch.zeros(k.shape, dtype=wide, device=k.device)
    dv_acc = torch.zeros(v.shape, dtype=wide, device=v.device)

    _delta_kernel[(triton.cdiv(TQ, BLOCK_M), B * H)](o, do, delta, TQ, D=D, BLOCK=BLOCK_M)
    _bwd_q_parallel[(triton.cdiv(TQ, BLOCK_M), B * H)](
        q, k, v, do, lse, delta, dq, dk_acc, dv_acc,
        1.0 / math.sqrt(D), TQ, TK,
        D=D, BM=BLOCK_M, BN=BLOCK_N, CAUSAL=bool(is_causal), ACC=acc)
    dk = dk_acc if dk_acc.dtype == k.dtype else dk_acc.to(k.dtype)
    dv = dv_acc if dv_acc.dtype == v.dtype else dv_acc.to(v.dtype)
    return dq, dk, dv
