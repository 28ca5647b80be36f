"""Masked softmax: a stub for you to fill in.

Generated from grader/problems/masked_softmax.py; grade it with `pytest -k masked_softmax`.
"""

import torch


def masked_softmax(scores, valid_lens=None):
    """Softmax over the last axis, over valid key positions only.

    weights[b, i, j] = exp(scores[b, i, j]) / sum over valid j' of exp(scores[b, i, j'])
    for valid j, and exactly 0 for masked j. A row with valid_len 0 is all zeros
    (never NaN, never uniform). Finite for scores of magnitude 1e4 in float32.
    Do not modify scores in place; stay differentiable with respect to scores.

    Args:
        scores: (B, Tq, Tk) float tensor
        valid_lens: None, (B,) or (B, Tq) integer tensor; key j is valid for a query when j < valid_len

    Returns:
        weights: (B, Tq, Tk), same dtype and device as scores

    Dims:
        B: batch size
        Tq: number of queries
        Tk: number of keys (= values)
    """
    raise NotImplementedError("masked_softmax: not started")
