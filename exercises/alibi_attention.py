"""ALiBi: a stub for you to fill in.

Generated from grader/problems/alibi_attention.py; grade it with `pytest -k alibi_attention`.
"""

import torch


def alibi_slopes(num_heads):
    """The (num_heads,) slopes of Press et al. (2022), head 0 first, float32 or float64 on the CPU. For n a
    power of two: slope[i] = 2 ** (-8 (i + 1) / n). Otherwise, with c the largest power of two <= n:
    the c slopes of c, then the slopes of 2c at indices 0, 2, 4, ..., the first n - c of them (the
    paper's get_slopes(2c)[0::2][:n - c]). n = 8: 1/2, 1/4, ..., 1/256. num_heads < 1, or not an int
    (a bool included), raises ValueError.

    Args:
        num_heads: int >= 1

    Returns:
        slopes: (num_heads,)
    """
    raise NotImplementedError("alibi_attention.alibi_slopes: not started")


def alibi_attention(queries, keys, values, is_causal=True, slopes=None, mask=None):
    """Query i sits at pos(i) = i + Tk - Tq (bottom right, in both modes). scores[b, n, i, j] = q . k /
    sqrt(d) - slopes[n] * |pos(i) - j|, the bias added after the scaling (a bias that differs by a
    constant per row, as BLOOM's slopes[n] * j, gives the same result). Key j is allowed when
    j <= pos(i) (if is_causal) and the mask allows it. weights = softmax over the allowed keys, 0
    elsewhere, all zeros on a row with no allowed key; output = weights @ values. slopes None means
    alibi_slopes(H); given slopes are used in the inputs' dtype and device. No other position encoding.
    Do not call F.scaled_dot_product_attention.

    Args:
        queries: (B, H, Tq, d)
        keys: (B, H, Tk, d)
        values: (B, H, Tk, dv)
        is_causal: bool: key j only for j <= pos(i)
        slopes: None (the paper's) or a float tensor (H,)
        mask: None, or bool broadcastable to the weights; True = the key may be attended, up to (B, H, Tq, Tk)

    Returns:
        output: (B, H, Tq, dv)
        weights: (B, H, Tq, Tk)

    Dims:
        B: batch size
        H: number of heads
        Tq: number of queries
        Tk: number of keys (= values)
        dv: value feature size
        d: feature size per head, or the attention size
    """
    raise NotImplementedError("alibi_attention: not started")
