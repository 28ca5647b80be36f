"""FlashAttention forward in Triton: a stub for you to fill in.

Generated from grader/problems/triton_flash_attention.py; grade it with `pytest -k triton_flash_attention`.
"""

import torch
import triton
import triton.language as tl


def triton_flash_attention(q, k, v, is_causal=False, BLOCK_M=64, BLOCK_N=64):
    """output = softmax(q k^T / sqrt(d)) v over the allowed keys; lse = logsumexp of each row's scaled
    scores over its allowed keys. is_causal: key j is allowed for query i when j <= i + (Tk - Tq)
    (aligned to the bottom right); a row with no allowed key has output 0 and lse -inf.
    The file defines one or more @triton.jit kernels and this launcher, which allocates the outputs
    and launches the kernels; the kernels compute every element of output and lse and store each once.
    Memory traffic: the kernels load each query tile once and each key and value tile at most once per
    query block that needs it (causal: never a key block wholly above the diagonal); no other global
    memory is written (no score matrix). Every load and store stays inside its tensor (mask partial
    blocks). BLOCK_M and BLOCK_N are powers of two of at least 16 (else ValueError); d is 16, 32, 64 or
    128. Triton's language only (triton.language, triton.jit, triton.cdiv): no autotuning, no inline
    assembly, nothing of triton.runtime or triton.compiler; no torch attention in the launcher.

    Args:
        q: (B, H, Tq, d)
        k: (B, H, Tk, d)
        v: (B, H, Tk, d)
        is_causal: bool: key j allowed for query i when j <= i + (Tk - Tq)
        BLOCK_M: queries per program (a power of two, >= 16)
        BLOCK_N: keys per inner step (a power of two, >= 16)

    Returns:
        output: (B, H, Tq, d), q's dtype
        lse: (B, H, Tq), float32 (float64 for float64 inputs); -inf on a row with no allowed key

    Dims:
        B: batch size
        H: number of heads
        Tq: number of queries
        Tk: number of keys (= values)
        d: feature size per head, or the attention size
    """
    raise NotImplementedError("triton_flash_attention: not started")
