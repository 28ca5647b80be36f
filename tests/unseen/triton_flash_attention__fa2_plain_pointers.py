"""BUG: none
STYLE: FlashAttention-2 style: one program per (query block, batch*head), natural exp with the scale folded into q once, plain pointer arithmetic over all four strides with explicit row/column masks and a single masked key loop.
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(
    Q, K, V, Out, Lse,
    softmax_scale,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_om,
    nheads, seqlen_q, seqlen_k,
    IS_CAUSAL: tl.constexpr,
    BLOCK_HEADDIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    COMPUTE: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_hb = tl.program_id(1)
    off_b = off_hb // nheads
    off_h = off_hb % nheads

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_HEADDIM)

    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + (offs_m[:, None] * stride_qm + offs_d[None, :])
    k_ptrs = K + off_b * stride_kb + off_h * stride_kh + (offs_n[:, None] * stride_kn + offs_d[None, :])
    v_ptrs = V + off_b * stride_vb + off_h * stride_vh + (offs_n[:, None] * stride_vn + offs_d[None, :])

    q = tl.load(q_ptrs, mask=offs_m[:, None] < seqlen_q, other=0.0)
    # fold the softmax scale into q once instead of scaling every score tile
    q = (q.to(COMPUTE) * softmax_scale).to(q.dtype)

    m_i = tl.zeros([BLOCK_M], dtype=COMPUTE) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=COMPUTE)
    acc_o = tl.zeros([BLOCK_M, BLOCK_HEADDIM], dtype=COMPUTE)

    # causal, aligned bottom-right: query i sees key j when j <= i + (seqlen_k - seqlen_q)
    shift = seqlen_k - seqlen_q
    if IS_CAUSAL:
        end_n = tl.minimum((start_m + 1) * BLOCK_M, seqlen_q) + shift
        end_n = tl.maximum(tl.minimum(end_n, seqlen_k), 0)
    else:
        end_n = seqlen_k

    for start_n in range(0, end_n, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[:, None] < seqlen_k, other=0.0)
        qk = tl.dot(q, tl.trans(k), out_dtype=COMPUTE)
        valid = cols[None, :] < seqlen_k
        if IS_CAUSAL:
            valid = valid & (offs_m[:, None] + shift >= cols[None, :])
        qk = tl.where(valid, qk, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(qk, 1))
        # rows without any allowed key so far: keep them at exactly zero, no NaN
        m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
        p = tl.exp(qk - m_ref[:, None])
        corr = tl.exp(m_i - m_ref)
        l_i = l_i * corr + tl.sum(p, 1)
        acc_o = acc_o * corr[:, None]

        v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < seqlen_k, other=0.0)
        acc_o += tl.dot(p.to(v.dtype), v, out_dtype=COMPUTE)
        m_i = m_new

    has_key = l_i > 0
    denom = tl.where(has_key, l_i, 1.0)
    acc_o = acc_o / denom[:, None]
    lse_i = tl.where(has_key, m_i + tl.log(denom), float("-inf"))

    row_ok = offs_m < seqlen_q
    tl.store(Lse + off_hb * seqlen_q + offs_m, lse_i, mask=row_ok)
    out_ptrs = Out + off_b * stride_ob + off_h * stride_oh + (offs_m[:, None] * stride_om + offs_d[None, :])
    tl.store(out_ptrs, acc_o.to(Out.dtype.element_ty), mask=row_ok[:, None])


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    for name, blk in (("BLOCK_M", BLOCK_M), ("BLOCK_N", BLOCK_N)):
        if isinstance(blk, bool) or not isinstance(blk, int) or blk < 16 or blk & (blk - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {blk!r}")
    batch, nheads, seqlen_q, d = q.shape
    _, _, seqlen_k, _ = k.shape
    assert k.shape == (batch, nheads, seqlen_k, d) and v.shape == k.shape
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dim {d} not supported (16, 32, 64 or 128)")
    softmax_scale = 1.0 / math.sqrt(d)

    lse = torch.empty((batch, nheads, seqlen_q), device=q.device,
                      dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    o = torch.empty_like(q)
    compute = tl.float64 if q.dtype == torch.float64 else tl.float32

    grid = (triton.cdiv(seqlen_q, BLOCK_M), batch * nheads)
    _fwd_kernel[grid](
        q, k, v, o, lse,
        softmax_scale,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        o.stride(0), o.stride(1), o.stride(2),
        nheads, seqlen_q, seqlen_k,
        IS_CAUSAL=bool(is_causal),
        BLOCK_HEADDIM=d,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        COMPUTE=compute,
        num_warps=4 if d <= 64 else 8,
        num_stages=1,
    )
    return o, lse
