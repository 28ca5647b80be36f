"""BUG: none
STYLE: tensor descriptors made inside the kernel (tl.make_tensor_descriptor over the (B*H, T, d) view, zero padding for partial tiles, clipped stores), the launcher sets a scratch allocator; causal mask applied only on blocks crossing the diagonal.
"""
import math

import torch
import triton
import triton.language as tl


def _scratch_alloc(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device=_scratch_alloc.device)


_scratch_alloc.device = "cpu"


@triton.jit
def _flash_fwd_desc(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                    scale, BH, SEQ_Q, SEQ_K,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr, ACC_TY: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)

    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[BH, SEQ_Q, HEAD_DIM], strides=[SEQ_Q * HEAD_DIM, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[BH, SEQ_K, HEAD_DIM], strides=[SEQ_K * HEAD_DIM, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[BH, SEQ_K, HEAD_DIM], strides=[SEQ_K * HEAD_DIM, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr, shape=[BH, SEQ_Q, HEAD_DIM], strides=[SEQ_Q * HEAD_DIM, HEAD_DIM, 1],
                                       block_shape=[1, BLOCK_M, HEAD_DIM])

    row0 = pid_m * BLOCK_M
    rows = row0 + tl.arange(0, BLOCK_M)
    cols_base = tl.arange(0, BLOCK_N)

    q = q_desc.load([bh, row0, 0]).reshape(BLOCK_M, HEAD_DIM)

    m = tl.full([BLOCK_M], float("-inf"), ACC_TY)
    s = tl.zeros([BLOCK_M], ACC_TY)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], ACC_TY)

    off = SEQ_K - SEQ_Q  # bottom-right alignment
    if CAUSAL:
        n_end = tl.maximum(tl.minimum(SEQ_K, tl.minimum(row0 + BLOCK_M, SEQ_Q) + off), 0)
    else:
        n_end = SEQ_K

    for n0 in range(0, n_end, BLOCK_N):
        k = k_desc.load([bh, n0, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = v_desc.load([bh, n0, 0]).reshape(BLOCK_N, HEAD_DIM)
        x = tl.dot(q, k.T, out_dtype=ACC_TY) * scale
        cols = n0 + cols_base
        ok = tl.broadcast_to(cols[None, :] < SEQ_K, (BLOCK_M, BLOCK_N))
        if CAUSAL:
            # only blocks that reach past the first row's last key need the triangle
            if n0 + BLOCK_N > row0 + off + 1:
                ok = ok & (cols[None, :] <= rows[:, None] + off)
        x = tl.where(ok, x, float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        w = tl.exp(x - m_use[:, None])
        a = tl.exp(m - m_use)
        s = s * a + tl.sum(w, axis=1)
        acc = acc * a[:, None] + tl.dot(w.to(v.dtype), v, out_dtype=ACC_TY)
        m = m_new

    nz = s > 0
    s_div = tl.where(nz, s, 1.0)
    out = acc / s_div[:, None]
    lse = tl.where(nz, m + tl.log(s_div), float("-inf"))
    o_desc.store([bh, row0, 0], out.to(o_ptr.dtype.element_ty).reshape(1, BLOCK_M, HEAD_DIM))
    tl.store(lse_ptr + bh * SEQ_Q + rows, lse, mask=rows < SEQ_Q)


def _check_block(name, b):
    if not isinstance(b, int) or isinstance(b, bool) or b < 16 or (b & (b - 1)) != 0:
        raise ValueError(f"{name}={b!r}: expected a power of two >= 16")


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    _check_block("BLOCK_M", BLOCK_M)
    _check_block("BLOCK_N", BLOCK_N)
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    if d not in (16, 32, 64, 128):
        raise ValueError(f"d={d}: expected 16, 32, 64 or 128")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    lse = torch.empty((B, H, Tq), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
                      device=q.device)
    _scratch_alloc.device = q.device
    triton.set_allocator(_scratch_alloc)
    grid = (triton.cdiv(Tq, BLOCK_M), B * H)
    _flash_fwd_desc[grid](q, k, v, out, lse, 1.0 / math.sqrt(d), B * H, Tq, Tk,
                          HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=bool(is_causal),
                          ACC_TY=tl.float64 if q.dtype == torch.float64 else tl.float32,
                          num_warps=8 if BLOCK_M * BLOCK_N >= 64 * 64 else 4)
    return out, lse
