"""BUG: the causal triangle is aligned top-left (key j allowed when j <= i, loop ends at the query block's own diagonal) instead of the contract's bottom-right j <= i + (Tk - Tq); right only when Tq == Tk.
STAGE: the causal mask
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _flash_attn_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
    sm_scale,
    q_stride_bh, q_stride_t,
    k_stride_bh, k_stride_t,
    v_stride_bh, v_stride_t,
    o_stride_bh, o_stride_t,
    n_q, n_k,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    ACC: tl.constexpr,
):
    block_m = tl.program_id(0)
    bh = tl.program_id(1)

    q_rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    k_rows = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    q_valid = q_rows < n_q

    q_tile = tl.load(q_ptr + bh * q_stride_bh + q_rows[:, None] * q_stride_t + dims[None, :],
                     mask=q_valid[:, None], other=0.0)

    running_max = tl.full((BLOCK_M,), float("-inf"), dtype=ACC)
    running_sum = tl.zeros((BLOCK_M,), dtype=ACC)
    out = tl.zeros((BLOCK_M, HEAD_DIM), dtype=ACC)

    if CAUSAL:
        # keys up to the last query of this block
        kv_end = tl.minimum((block_m + 1) * BLOCK_M, n_k)
    else:
        kv_end = n_k

    for kv_start in range(0, kv_end, BLOCK_N):
        kv_idx = kv_start + k_rows
        kv_valid = kv_idx < n_k
        k_tile = tl.load(k_ptr + bh * k_stride_bh + kv_idx[:, None] * k_stride_t + dims[None, :],
                         mask=kv_valid[:, None], other=0.0)
        v_tile = tl.load(v_ptr + bh * v_stride_bh + kv_idx[:, None] * v_stride_t + dims[None, :],
                         mask=kv_valid[:, None], other=0.0)

        scores = tl.dot(q_tile, tl.trans(k_tile), out_dtype=ACC) * sm_scale
        keep = kv_valid[None, :]
        if CAUSAL:
            keep = keep & (kv_idx[None, :] <= q_rows[:, None])
        scores = tl.where(keep, scores, float("-inf"))

        block_max = tl.max(scores, axis=1)
        new_max = tl.maximum(running_max, block_max)
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
        probs = tl.exp(scores - safe_max[:, None])
        rescale = tl.exp(running_max - safe_max)
        running_sum = running_sum * rescale + tl.sum(probs, axis=1)
        out = out * rescale[:, None] + tl.dot(probs.to(v_tile.dtype), v_tile, out_dtype=ACC)
        running_max = new_max

    nonempty = running_sum > 0.0
    denom = tl.where(nonempty, running_sum, 1.0)
    out = out / denom[:, None]
    lse = tl.where(nonempty, running_max + tl.log(denom), float("-inf"))

    tl.store(o_ptr + bh * o_stride_bh + q_rows[:, None] * o_stride_t + dims[None, :],
             out.to(o_ptr.dtype.element_ty), mask=q_valid[:, None])
    tl.store(lse_ptr + bh * n_q + q_rows, lse, mask=q_valid)


def _validate_block(value, name):
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an int")
    if value < 16 or (value & (value - 1)) != 0:
        raise ValueError(f"{name} must be a power of two >= 16, got {value}")


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    _validate_block(BLOCK_M, "BLOCK_M")
    _validate_block(BLOCK_N, "BLOCK_N")
    B, H, n_q, head_dim = q.shape
    n_k = k.shape[2]
    if head_dim not in (16, 32, 64, 128):
        raise ValueError(f"head_dim {head_dim} not in (16, 32, 64, 128)")

    q3 = q.contiguous().view(B * H, n_q, head_dim)
    k3 = k.contiguous().view(B * H, n_k, head_dim)
    v3 = v.contiguous().view(B * H, n_k, head_dim)
    o3 = torch.empty_like(q3)
    acc_dtype = tl.float64 if q.dtype == torch.float64 else tl.float32
    lse = torch.empty((B, H, n_q), device=q.device,
                      dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)

    grid = (triton.cdiv(n_q, BLOCK_M), B * H)
    _flash_attn_fwd_kernel[grid](
        q3, k3, v3, o3, lse,
        1.0 / math.sqrt(head_dim),
        q3.stride(0), q3.stride(1),
        k3.stride(0), k3.stride(1),
        v3.stride(0), v3.stride(1),
        o3.stride(0), o3.stride(1),
        n_q, n_k,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        CAUSAL=bool(is_causal), ACC=acc_dtype,
    )
    return o3.view(B, H, n_q, head_dim), lse
