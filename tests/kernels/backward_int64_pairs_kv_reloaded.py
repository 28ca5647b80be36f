"""The reference with K and V reloaded for every query block, loaded through int64 pointers two float32 elements per lane, so that lanes under-count elements (a red team's submission)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _tile(ptr, rows, R, D: tl.constexpr):
    """ptr[rows, :D] (rows < R), float32 read as int64 pairs; other dtypes as they are."""
    if ptr.dtype.element_ty == tl.float32:
        half = tl.arange(0, D // 2)
        x = tl.load(ptr.to(tl.pointer_type(tl.int64), bitcast=True) + rows[:, None] * (D // 2) + half[None, :],
                    mask=rows[:, None] < R, other=0)
        lo = (x & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
        hi = (x >> 32).to(tl.int32).to(tl.float32, bitcast=True)
        return tl.reshape(tl.join(lo, hi), [rows.shape[0], D])
    else:
        feats = tl.arange(0, D)
        return tl.load(ptr + rows[:, None] * D + feats[None, :], mask=rows[:, None] < R, other=0.0)


@triton.jit
def _delta_kernel(O, DO, DELTA, Tq, D: tl.constexpr, BLOCK_M: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    work = tl.float64 if O.dtype.element_ty == tl.float64 else tl.float32
    o = _tile(O + head * Tq * D, rows, Tq, D)
    do = _tile(DO + head * Tq * D, rows, Tq, D)
    delta = tl.sum(o.to(work) * do.to(work), 1)
    tl.store(DELTA + head * Tq + rows, delta, mask=rows < Tq)


@triton.jit
def _kv_kernel(Q, K, V, DO, LSE, DELTA, DQ, DK, DV, Tq, Tk, TqE, scale,
               D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
    start_n = tl.program_id(0)
    head = tl.program_id(1)
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    feats = tl.arange(0, D)
    work = tl.float64 if Q.dtype.element_ty == tl.float64 else tl.float32
    dk = tl.zeros([BLOCK_N, D], dtype=work)
    dv = tl.zeros([BLOCK_N, D], dtype=work)
    shift = Tk - Tq
    if IS_CAUSAL:
        first = tl.maximum(start_n * BLOCK_N - shift, 0)
        m_begin = (first // BLOCK_M) * BLOCK_M
    else:
        m_begin = 0
    for start_m in range(m_begin, Tq, BLOCK_M):
        rows = start_m + offs_m
        k = _tile(K + head * Tk * D, cols, Tk, D)  # reloaded for every query block
        v = _tile(V + head * Tk * D, cols, Tk, D)
        q = _tile(Q + head * Tq * D, rows, Tq, D)
        do = _tile(DO + head * Tq * D, rows, Tq, D)
        lse = tl.load(LSE + head * Tq + rows, mask=rows < Tq, other=0.0).to(work)
        delta = tl.load(DELTA + head * Tq + rows, mask=rows < Tq, other=0.0).to(work)
        s = tl.dot(q, tl.trans(k)).to(work) * scale
        allowed = (rows[:, None] < Tq) & (cols[None, :] < Tk)
        if IS_CAUSAL:
            allowed = allowed & (cols[None, :] <= rows[:, None] + shift)
        p = tl.where(allowed, tl.exp(s - tl.where(allowed, lse[:, None], s)), 0.0)
        dv += tl.dot(tl.trans(p).to(do.dtype), do).to(work)
        dp = tl.dot(do, tl.trans(v)).to(work)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q).to(work) * scale
        dq = tl.dot(ds.to(k.dtype), k).to(work) * scale
        tl.atomic_add(DQ + head * Tq * D + rows[:, None] * D + feats[None, :], dq.to(DQ.dtype.element_ty),
                      mask=rows[:, None] < Tq)
    tl.store(DK + head * Tk * D + cols[:, None] * D + feats[None, :], dk.to(DK.dtype.element_ty), mask=cols[:, None] < Tk)
    tl.store(DV + head * Tk * D + cols[:, None] * D + feats[None, :], dv.to(DV.dtype.element_ty), mask=cols[:, None] < Tk)


def _p2(n):
    return isinstance(n, int) and n >= 16 and n & (n - 1) == 0


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not (_p2(BLOCK_M) and _p2(BLOCK_N)):
        raise ValueError(f"BLOCK_M = {BLOCK_M} and BLOCK_N = {BLOCK_N} must be powers of two, at least 16")
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    q, k, v, o, lse, do = (t.contiguous() for t in (q, k, v, o, lse, do))
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    delta = torch.empty((B, H, Tq), dtype=work, device=q.device)
    dq = torch.zeros(q.shape, dtype=work, device=q.device)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    _delta_kernel[(triton.cdiv(Tq, BLOCK_M), B * H)](o, do, delta, Tq, D=d, BLOCK_M=BLOCK_M)
    _kv_kernel[(triton.cdiv(Tk, BLOCK_N), B * H)](q, k, v, do, lse, delta, dq, dk, dv, Tq, Tk, Tq, d ** -0.5,
                                                  D=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, IS_CAUSAL=is_causal,
                                                  num_warps=8)
    return dq.to(q.dtype), dk, dv
