"""Rotary position embedding (RoPE): a stub for you to fill in.

Generated from grader/problems/rope.py; grade it with `pytest -k rope`.
"""

import torch


def apply_rope(x, positions, base=10000.0, interleaved=False):
    """Rotate each pair of features of x by the angle position * base^(-2i/d), i = 0 .. d/2-1:
    (a, b) -> (a cos - b sin, a sin + b cos). Pair i is features (i, i + d/2) when interleaved=False
    (rotate-half: GPT-NeoX, Hugging Face) and (2i, 2i+1) when interleaved=True (RoFormer, Meta's LLaMA).
    positions broadcast to x.shape[:-1] and need not start at 0. An odd d raises ValueError. Returns
    the same shape, dtype and device; never modifies x. Angles in x's dtype for float32/float64
    inputs, in float32 for float16/bfloat16.

    Args:
        x: (..., T, d), d even
        positions: integer tensor broadcastable to (..., T): each row's absolute position
        base: float, 10000.0 by default
        interleaved: bool: pairs (2i, 2i+1) instead of (i, i + d/2)

    Returns:
        output: (..., T, d), x rotated

    Dims:
        d: feature size per head, or the attention size
        T: encoder steps, or positions (rows) of x
        ...: zero or more leading (batch) dims
    """
    raise NotImplementedError("rope: not started")
