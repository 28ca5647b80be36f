"""FlashAttention forward in Triton with the key range split in two phases.

Phase 1 walks the key blocks that every query row of the program may attend to in full (all keys
inside Tk and, when causal, at or below the diagonal of the block's first row): no mask at all,
neither on the loads nor on the scores. Phase 2 walks the remaining key blocks up to the diagonal
of the block's last row (or the ragged tail of Tk when not causal) with the bounds and causal masks.
The two ranges are disjoint, so every key/value tile is read at most once per program.

BUG: none (written from the contract by someone who never saw the grader).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fa_fwd_two_phase(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
    sm_scale,
    n_heads, seq_q, seq_k,
    sqb, sqh, sqt, sqd,
    skb, skh, skt, skd,
    svb, svh, svt, svd,
    sob, soh, sot, sod,
    slb, slh, slt,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    WIDE: tl.constexpr,   # True: float64 statistics
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // n_heads).to(tl.int64)
    h = (pid_bh % n_heads).to(tl.int64)

    if WIDE:
        stat_ty = tl.float64
    else:
        stat_ty = tl.float32

    rows = pid_m * BM + tl.arange(0, BM)
    cols = tl.arange(0, D)
    keys = tl.arange(0, BN)
    row_ok = rows < seq_q

    q_tile = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqt + cols[None, :] * sqd,
                     mask=row_ok[:, None], other=0.0)
    k_head = k_ptr + b * skb + h * skh
    v_head = v_ptr + b * svb + h * svh

    run_max = tl.full([BM], float("-inf"), stat_ty)
    run_sum = tl.zeros([BM], stat_ty)
    o_acc = tl.zeros([BM, D], stat_ty)

    shift = seq_k - seq_q   # key j is allowed for query i iff j <= i + shift
    first_row = pid_m * BM
    if CAUSAL:
        # keys allowed to every row of the block: j <= first_row + shift
        n_free = tl.maximum(first_row + shift + 1, 0)
        # keys needed by the block's last row (rows past seq_q need nothing)
        n_need = tl.minimum(first_row + BM + shift, seq_k)
        n_need = tl.maximum(n_need, 0)
    else:
        n_free = seq_k
        n_need = seq_k
    # whole, mask-free blocks: first_row + shift + 1 <= seq_k, so they all lie inside seq_k
    free_end = (n_free // BN) * BN

    # ---- phase 1: blocks fully allowed for every row, no masks ----
    for start in range(0, free_end, BN):
        kn = start + keys
        k_t = tl.load(k_head + kn[None, :] * skt + cols[:, None] * skd)          # (D, BN)
        s = tl.dot(q_tile, k_t).to(stat_ty) * sm_scale
        new_max = tl.maximum(run_max, tl.max(s, 1))                             # finite: BN real keys
        corr = tl.exp(run_max - new_max)
        p = tl.exp(s - new_max[:, None])
        run_sum = run_sum * corr + tl.sum(p, 1)
        v_t = tl.load(v_head + kn[:, None] * svt + cols[None, :] * svd)         # (BN, D)
        o_acc = o_acc * corr[:, None]
        o_acc = tl.dot(p.to(v_t.dtype), v_t, o_acc)
        run_max = new_max

    # ---- phase 2: diagonal block(s) and the ragged tail, masked ----
    for start in range(free_end, n_need, BN):
        kn = start + keys
        key_ok = kn < seq_k
        k_t = tl.load(k_head + kn[None, :] * skt + cols[:, None] * skd, mask=key_ok[None, :], other=0.0)
        s = tl.dot(q_tile, k_t).to(stat_ty) * sm_scale
        allow = key_ok[None, :]
        if CAUSAL:
            allow = allow & (kn[None, :] <= rows[:, None] + shift)
        s = tl.where(allow, s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, 1))
        # a row may still have no allowed key: keep its max at -inf but shift by 0
        base = tl.where(new_max > float("-inf"), new_max, 0.0)
        corr = tl.exp(run_max - base)
        p = tl.exp(s - base[:, None])
        run_sum = run_sum * corr + tl.sum(p, 1)
        v_t = tl.load(v_head + kn[:, None] * svt + cols[None, :] * svd, mask=key_ok[:, None], other=0.0)
        o_acc = o_acc * corr[:, None]
        o_acc = tl.dot(p.to(v_t.dtype), v_t, o_acc)
        run_max = new_max

    has_key = run_sum > 0.0
    denom = tl.where(has_key, run_sum, 1.0)
    out = o_acc / denom[:, None]
    lse = tl.where(has_key, run_max + tl.log(denom), float("-inf"))

    tl.store(o_ptr + b * sob + h * soh + rows[:, None] * sot + cols[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(lse_ptr + b * slb + h * slh + rows * slt, lse.to(lse_ptr.dtype.element_ty), mask=row_ok)


def _check_block(name, value):
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 16 and value & (value - 1) == 0
    if not ok:
        raise ValueError(f"{name} must be a power of two of at least 16, got {value!r}")


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    """FlashAttention forward: returns (output, lse); see the module docstring for the two phases."""
    _check_block("BLOCK_M", BLOCK_M)
    _check_block("BLOCK_N", BLOCK_N)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("expected q, k, v of shape (B, H, T, d)")
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    if tuple(k.shape) != (B, H, Tk, d) or tuple(v.shape) != (B, H, Tk, d):
        raise ValueError(f"shape mismatch: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if d not in (16, 32, 64, 128):
        raise ValueError(f"d must be 16, 32, 64 or 128, got {d}")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float16, torch.float32, torch.float64):
        raise ValueError(f"unsupported dtypes {q.dtype}, {k.dtype}, {v.dtype}")

    wide = q.dtype == torch.float64
    output = torch.empty((B, H, Tq, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, Tq), dtype=torch.float64 if wide else torch.float32, device=q.device)
    if B * H * Tq == 0:
        return output, lse

    grid = (triton.cdiv(Tq, BLOCK_M), B * H)
    _fa_fwd_two_phase[grid](
        q, k, v, output, lse,
        d ** -0.5,
        H, Tq, Tk,
        q.stride(0), q.stride(1), q.stride(2), q.stride(3),
        k.stride(0), k.stride(1), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), v.stride(2), v.stride(3),
        output.stride(0), output.stride(1), output.stride(2), output.stride(3),
        lse.stride(0), lse.stride(1), lse.stride(2),
        CAUSAL=bool(is_causal), D=d, BM=BLOCK_M, BN=BLOCK_N, WIDE=wide,
        num_warps=4 if BLOCK_M * max(BLOCK_N, d) <= 8192 else 8,
        num_stages=2,
    )
    return output, lse
