"""BUG: a two-pass softmax: pass 1 streams the key tiles for the row max and the normaliser, pass 2 loads every key tile again (with V) to accumulate the normalised output; the values are right but each key tile is loaded twice per query block, over the contract's "at most once per query block".
STAGE: the key loop's memory traffic
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _two_pass_attn(
    Q, K, V, O, L,
    scale,
    H, TQ, TK,
    sqb, sqh, sqt,
    skb, skh, skt,
    svb, svh, svt,
    sob, soh, sot,
    IS_CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ACC_T: tl.constexpr,
):
    pm = tl.program_id(0)
    pbh = tl.program_id(1)
    b = pbh // H
    h = pbh % H

    offs_m = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    m_mask = offs_m < TQ

    Qp = Q + b * sqb + h * sqh
    Kp = K + b * skb + h * skh
    Vp = V + b * svb + h * svh
    q = tl.load(Qp + offs_m[:, None] * sqt + offs_d[None, :], mask=m_mask[:, None], other=0.0)

    causal_shift = TK - TQ
    n_hi = TK
    if IS_CAUSAL:
        n_hi = tl.minimum(TK, tl.minimum(pm * BLOCK_M + BLOCK_M, TQ) + causal_shift)
        n_hi = tl.maximum(n_hi, 0)

    # ---- pass 1: row max and row sum of exp ----
    row_max = tl.full([BLOCK_M], float("-inf"), ACC_T)
    row_sum = tl.zeros([BLOCK_M], ACC_T)
    for n0 in range(0, n_hi, BLOCK_N):
        cols = n0 + offs_n
        k = tl.load(Kp + cols[:, None] * skt + offs_d[None, :], mask=cols[:, None] < TK, other=0.0)
        s = tl.dot(q, tl.trans(k), out_dtype=ACC_T) * scale
        ok = cols[None, :] < TK
        if IS_CAUSAL:
            ok = ok & (cols[None, :] <= offs_m[:, None] + causal_shift)
        s = tl.where(ok, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, 1))
        base = tl.where(new_max == float("-inf"), 0.0, new_max)
        row_sum = row_sum * tl.exp(row_max - base) + tl.sum(tl.exp(s - base[:, None]), 1)
        row_max = new_max

    empty = row_sum == 0.0
    inv_sum = tl.where(empty, 0.0, 1.0 / tl.where(empty, 1.0, row_sum))
    base = tl.where(empty, 0.0, row_max)

    # ---- pass 2: normalised probabilities times V ----
    acc = tl.zeros([BLOCK_M, D], ACC_T)
    for n0 in range(0, n_hi, BLOCK_N):
        cols = n0 + offs_n
        k = tl.load(Kp + cols[:, None] * skt + offs_d[None, :], mask=cols[:, None] < TK, other=0.0)
        v = tl.load(Vp + cols[:, None] * svt + offs_d[None, :], mask=cols[:, None] < TK, other=0.0)
        s = tl.dot(q, tl.trans(k), out_dtype=ACC_T) * scale
        ok = cols[None, :] < TK
        if IS_CAUSAL:
            ok = ok & (cols[None, :] <= offs_m[:, None] + causal_shift)
        p = tl.where(ok, tl.exp(s - base[:, None]), 0.0) * inv_sum[:, None]
        acc += tl.dot(p.to(v.dtype), v, out_dtype=ACC_T)

    lse = tl.where(empty, float("-inf"), base + tl.log(tl.where(empty, 1.0, row_sum)))
    tl.store(L + pbh * TQ + offs_m, lse, mask=m_mask)
    tl.store(O + b * sob + h * soh + offs_m[:, None] * sot + offs_d[None, :], acc.to(O.dtype.element_ty),
             mask=m_mask[:, None])


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    for blk in (BLOCK_M, BLOCK_N):
        if not isinstance(blk, int) or isinstance(blk, bool) or blk < 16 or blk & (blk - 1):
            raise ValueError(f"block sizes must be powers of two >= 16 (got BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N})")
    B, H, TQ, D = q.shape
    TK = k.shape[2]
    if D not in (16, 32, 64, 128):
        raise ValueError(f"unsupported head size {D}")
    o = torch.empty_like(q)
    lse = torch.empty((B, H, TQ), device=q.device,
                      dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    grid = (triton.cdiv(TQ, BLOCK_M), B * H)
    _two_pass_attn[grid](
        q, k, v, o, lse,
        1.0 / math.sqrt(D),
        H, TQ, TK,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        o.stride(0), o.stride(1), o.stride(2),
        IS_CAUSAL=bool(is_causal), D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        ACC_T=tl.float64 if q.dtype == torch.float64 else tl.float32,
    )
    return o, lse
