"""BUG: none
STYLE: modelled on the official Triton fused-attention tutorial: log2(e) folded into qk_scale and exp2 throughout, a stage-based causal loop (STAGE 1: key blocks below the diagonal band, unmasked; STAGE 2: the band, masked), lse converted back to natural log.
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q,
                    K_base, V_base, stride_kn, stride_vn,
                    start_m, qk_scale, N_Q, N_KV,
                    offs_m, offs_n, offs_d,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                    ACC_DTYPE: tl.constexpr):
    # bottom-right causal alignment: row i sees keys j <= i + (N_KV - N_Q)
    diag = N_KV - N_Q
    row_lo = start_m * BLOCK_M
    # keys every row of this block may see: j <= row_lo + diag
    full = tl.maximum(row_lo + diag + 1, 0)
    full_hi = (full // BLOCK_N) * BLOCK_N
    if STAGE == 1:
        lo, hi = 0, full_hi
    elif STAGE == 2:
        last_row = tl.minimum(row_lo + BLOCK_M, N_Q)
        hi = tl.minimum(tl.maximum(last_row + diag, 0), N_KV)
        lo = tl.minimum(full_hi, hi)
    else:
        lo, hi = 0, N_KV
    k_ptrs = K_base + (lo + offs_n)[None, :] * stride_kn + offs_d[:, None]
    v_ptrs = V_base + (lo + offs_n)[:, None] * stride_vn + offs_d[None, :]
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if STAGE == 1:
            k = tl.load(k_ptrs)
        else:
            k = tl.load(k_ptrs, mask=cols[None, :] < N_KV, other=0.0)
        qk = tl.dot(q, k, out_dtype=ACC_DTYPE) * qk_scale
        if STAGE == 2:
            keep = (cols[None, :] <= offs_m[:, None] + diag) & (cols[None, :] < N_KV)
            qk = tl.where(keep, qk, float("-inf"))
        elif STAGE == 3:
            qk = tl.where(cols[None, :] < N_KV, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        # a row that has seen no allowed key yet keeps m = -inf: shift by 0 instead
        m_sub = tl.where(m_ij == float("-inf"), 0.0, m_ij)
        p = tl.math.exp2(qk - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if STAGE == 1:
            v = tl.load(v_ptrs)
        else:
            v = tl.load(v_ptrs, mask=cols[:, None] < N_KV, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc, out_dtype=ACC_DTYPE)
        m_i = m_ij
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, Out, M, qk_scale,
              stride_qz, stride_qm, stride_kz, stride_kn, stride_vz, stride_vn, stride_oz, stride_om,
              N_Q, N_KV,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              STAGE: tl.constexpr, ACC_DTYPE: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    Q_base = Q + off_hz.to(tl.int64) * stride_qz
    K_base = K + off_hz.to(tl.int64) * stride_kz
    V_base = V + off_hz.to(tl.int64) * stride_vz
    O_base = Out + off_hz.to(tl.int64) * stride_oz

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=ACC_DTYPE)
    l_i = tl.zeros([BLOCK_M], dtype=ACC_DTYPE)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=ACC_DTYPE)
    row_ok = offs_m < N_Q
    q = tl.load(Q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    # STAGE 3 (causal): off-diagonal blocks first, then the diagonal band. STAGE 1: everything, masked at the tail.
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K_base, V_base, stride_kn, stride_vn,
                                        start_m, qk_scale, N_Q, N_KV, offs_m, offs_n, offs_d,
                                        BLOCK_M, BLOCK_N, 4 - STAGE, ACC_DTYPE)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K_base, V_base, stride_kn, stride_vn,
                                        start_m, qk_scale, N_Q, N_KV, offs_m, offs_n, offs_d,
                                        BLOCK_M, BLOCK_N, 2, ACC_DTYPE)

    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    m_safe = tl.where(empty, 0.0, m_i)
    lse = tl.where(empty, float("-inf"), (m_safe + tl.math.log2(l_safe)) * 0.6931471805599453)
    acc = acc / l_safe[:, None]
    tl.store(M + off_hz.to(tl.int64) * N_Q + offs_m, lse, mask=row_ok)
    tl.store(O_base + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=row_ok[:, None])


def _is_pow2_block(b):
    return isinstance(b, int) and not isinstance(b, bool) and b >= 16 and (b & (b - 1)) == 0


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    if not _is_pow2_block(BLOCK_M) or not _is_pow2_block(BLOCK_N):
        raise ValueError(f"BLOCK_M and BLOCK_N must be powers of two >= 16, got {BLOCK_M}, {BLOCK_N}")
    B, H, N_Q, HEAD_DIM = q.shape
    N_KV = k.shape[2]
    if HEAD_DIM not in (16, 32, 64, 128):
        raise ValueError(f"head dim must be 16, 32, 64 or 128, got {HEAD_DIM}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    acc_dtype = tl.float64 if q.dtype == torch.float64 else tl.float32
    M = torch.empty((B, H, N_Q), device=q.device, dtype=lse_dtype)
    sm_scale = 1.0 / math.sqrt(HEAD_DIM)
    qk_scale = sm_scale * 1.4426950408889634  # fold log2(e): exp(x) == exp2(x * log2(e))
    stage = 3 if is_causal else 1
    grid = (triton.cdiv(N_Q, BLOCK_M), B * H)
    _attn_fwd[grid](q, k, v, o, M, qk_scale,
                    q.stride(1), q.stride(2), k.stride(1), k.stride(2), v.stride(1), v.stride(2),
                    o.stride(1), o.stride(2),
                    N_Q, N_KV,
                    HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, STAGE=stage, ACC_DTYPE=acc_dtype,
                    num_warps=4, num_stages=2)
    return o, M
