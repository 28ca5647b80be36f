"""BUG: the launcher takes the scale as 1/sqrt(q.shape[-2]), the query length, instead of 1/sqrt(q.shape[-1]) = 1/sqrt(d); P, dQ and dK are wrong unless Tq == d.
STAGE: the softmax scale used to recompute P
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _prep(O, dO, Dl, T, HD: tl.constexpr, BT: tl.constexpr):
    t = tl.program_id(0) * BT + tl.arange(0, BT)
    c = tl.arange(0, HD)
    off = tl.program_id(1) * T * HD + t[:, None] * HD + c[None, :]
    o = tl.load(O + off, mask=t[:, None] < T, other=0.)
    g = tl.load(dO + off, mask=t[:, None] < T, other=0.)
    tl.store(Dl + tl.program_id(1) * T + t, tl.sum(o.to(Dl.dtype.element_ty) * g.to(Dl.dtype.element_ty), 1), mask=t < T)


@triton.jit
def _bwd(Q, K, V, dO, LSE, Dl, dQ, dK, dV, sc2, sc, Tq, Tk,
         HD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr, F: tl.constexpr):
    # one program per key block; exp2 form: P = 2^(s*log2e - lse*log2e)
    j = tl.program_id(0) * BN + tl.arange(0, BN)
    z = tl.program_id(1)
    c = tl.arange(0, HD)
    jm = j < Tk
    kv = z * Tk * HD + j[:, None] * HD + c[None, :]
    k = tl.load(K + kv, mask=jm[:, None], other=0.)
    v = tl.load(V + kv, mask=jm[:, None], other=0.)
    dk = tl.zeros([BN, HD], F)
    dv = tl.zeros([BN, HD], F)
    sh = Tk - Tq
    i0 = 0
    if CAUSAL:
        i0 = tl.maximum(tl.program_id(0) * BN - sh, 0) // BM * BM
    for s0 in range(i0, Tq, BM):
        i = s0 + tl.arange(0, BM)
        im = i < Tq
        qo = z * Tq * HD + i[:, None] * HD + c[None, :]
        q = tl.load(Q + qo, mask=im[:, None], other=0.)
        do = tl.load(dO + qo, mask=im[:, None], other=0.)
        l2 = tl.load(LSE + z * Tq + i, mask=im, other=float("-inf")) * 1.4426950408889634
        Di = tl.load(Dl + z * Tq + i, mask=im, other=0.)
        ok = im[:, None] & jm[None, :] & (l2[:, None] > float("-inf"))
        if CAUSAL:
            ok &= j[None, :] <= i[:, None] + sh
        p = tl.where(ok, tl.math.exp2(tl.dot(q, k.T, out_dtype=F) * sc2 - l2[:, None]), 0.)
        dv += tl.dot(p.T.to(do.dtype), do, out_dtype=F)
        ds = p * (tl.dot(do, v.T, out_dtype=F) - Di[:, None])
        dk += tl.dot(ds.T.to(q.dtype), q, out_dtype=F)
        tl.atomic_add(dQ + qo, tl.dot(ds.to(k.dtype), k, out_dtype=F) * sc, mask=im[:, None])
    tl.store(dK + kv, (dk * sc).to(dK.dtype.element_ty), mask=jm[:, None])
    tl.store(dV + kv, dv.to(dV.dtype.element_ty), mask=jm[:, None])


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if any(type(b) is not int or b < 16 or b & (b - 1) for b in (BLOCK_M, BLOCK_N)):
        raise ValueError("BLOCK_M/BLOCK_N must be powers of 2 >= 16")
    B, H, Tq, HD = q.shape
    Tk = k.shape[-2]
    if HD not in (16, 32, 64, 128):
        raise ValueError("d must be one of 16, 32, 64, 128")
    q, k, v, o, lse, do = (x.contiguous() for x in (q, k, v, o, lse, do))
    sc = 1.0 / math.sqrt(q.shape[-2])
    f = torch.float64 if q.dtype == torch.float64 else torch.float32
    Dl = torch.empty(B, H, Tq, dtype=f, device=q.device)
    dq = torch.zeros(B, H, Tq, HD, dtype=f, device=q.device)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    _prep[(triton.cdiv(Tq, BLOCK_M), B * H)](o, do, Dl, Tq, HD=HD, BT=BLOCK_M)
    _bwd[(triton.cdiv(Tk, BLOCK_N), B * H)](q, k, v, do, lse, Dl, dq, dk, dv, sc * 1.4426950408889634, sc, Tq, Tk,
                                            HD=HD, BM=BLOCK_M, BN=BLOCK_N, CAUSAL=bool(is_causal),
                                            F=tl.float64 if f is torch.float64 else tl.float32)
    return (dq if dq.dtype == q.dtype else dq.to(q.dtype)), dk, dv
