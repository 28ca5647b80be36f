"""FlashAttention backward in Triton: a stub for you to fill in.

Generated from grader/problems/triton_flash_attention_backward.py; grade it with `pytest -k triton_flash_attention_backward`.
"""

import torch
import triton
import triton.language as tl


def triton_flash_attention_backward(q, k, v, o, lse, do, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    """The gradients of sum(O * do) with respect to q, k and v, where O = softmax(q k^T / sqrt(d)) v over
    the allowed keys (section 22's rule) and (o, lse) are what triton_flash_attention returned for
    them: P = exp(q k^T / sqrt(d) - lse) on the allowed keys (0 elsewhere, and on a row whose lse is
    -inf), dV = P^T do, dS = P * (do v^T - D) with D = rowsum(do * o), dQ = dS k / sqrt(d),
    dK = dS^T q / sqrt(d). The file defines @triton.jit kernels and this launcher: a pre-pass kernel
    computes D, and the main kernels recompute P block by block from lse (no score matrix in global
    memory). Grid: a program per BLOCK_N keys that loops over query blocks of BLOCK_M rows (dK, dV),
    and dQ either added by those programs with tl.atomic_add into a zeroed buffer, or computed by a
    program per BLOCK_M queries looping over key blocks of BLOCK_N; or a program per query block with
    dK and dV added with atomics. Each tile loaded at most once per block that needs it (causal: never
    a block that sees none of the other's keys). Every load and store stays inside its tensor.
    BLOCK_M and BLOCK_N are powers of two of at least 16 (else ValueError); d is 16, 32, 64 or 128.
    Triton's language only, as in section 22; no automatic differentiation and no torch attention.

    Args:
        q: (B, H, Tq, d)
        k: (B, H, Tk, d)
        v: (B, H, Tk, d)
        o: (B, H, Tq, d): the forward's output
        lse: (B, H, Tq): the forward's lse, float32 (float64 for float64 inputs)
        do: (B, H, Tq, d): the gradient of the output
        is_causal: bool: key j allowed for query i when j <= i + (Tk - Tq)
        BLOCK_M: queries per block (a power of two, >= 16)
        BLOCK_N: keys per block (a power of two, >= 16)

    Returns:
        dq: (B, H, Tq, d), q's dtype
        dk: (B, H, Tk, d), k's dtype
        dv: (B, H, Tk, d), v's dtype

    Dims:
        B: batch size
        H: number of heads
        Tq: number of queries
        Tk: number of keys (= values)
        d: feature size per head, or the attention size
    """
    raise NotImplementedError("triton_flash_attention_backward: not started")
