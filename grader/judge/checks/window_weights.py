"""Check window_weights: weights whose window depends on the call's own inputs and weights (Luong's local
attention, where p_t is predicted), and whose rows need not sum to 1 (local-p's Gaussian). The spec gives, through
its options, which keys each query of a call may attend and what multiplies the window's softmax; the check reads
the learner's weights on the general calls: exactly 0 outside the window, finite, a row with no allowed key all
zeros, and weights / factor summing to 1 over each row's window (weight_sums is the special case factor = 1 with a
window the mask rule alone decides)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..compare import argmax_index, tolerance
from ..registry import Check, options, register
from .outputs import group_base


@dataclass(frozen=True)
class Window:
    """The check's options: `allowed(call, cfg) -> bool (..., Tq, Tk)`, which keys each query may attend in a float64
    call (its args and its module's state), and `factor(call, cfg) -> float64 (..., Tq, Tk)`, what multiplies the
    softmax over those keys (ones where the rows sum to 1); cfg holds the variant."""

    allowed: Callable
    factor: Callable = lambda call, cfg: None


def check_window_weights(ctx):
    tol = tolerance("float64")
    opts = options(ctx.problem, "window_weights")
    at_w = ctx.problem.weights_index
    for case in ctx.of("base"):
        w = ctx.outputs(case)[at_w].to(torch.float64)
        cfg = {**case.cfg, **case.variant}
        allowed = opts.allowed(case.call, cfg).expand(w.shape)
        factor = opts.factor(case.call, cfg)
        factor = torch.ones_like(w) if factor is None else factor.expand(w.shape)
        if not torch.isfinite(w).all():
            at = tuple((~torch.isfinite(w)).nonzero()[0].tolist())
            ctx.fail(case, f"weights{list(at)} = {w[at].item()}: weights must be finite, and a row with no allowed "
                     "key all zeros")
        leaked = (w != 0) & ~allowed
        if leaked.any():
            at = tuple(leaked.nonzero()[0].tolist())
            what = ("a row with no allowed key must be all zeros (not NaN, not uniform)" if not allowed[at[:-1]].any()
                    else "keys outside the row's window (or its valid length) must get weight exactly 0")
            ctx.fail(case, f"weights{list(at)} = {w[at].item():.6g}: {what}")
        rows = allowed.any(-1)
        sums = torch.where(allowed, w / factor, torch.zeros_like(w)).sum(-1)
        off = (sums - 1).abs() * rows
        if (off > 10 * tol.atol).any():
            at = argmax_index(off)
            raw = w.sum(-1)[at].item()
            renormalised = abs(raw - 1) <= 10 * tol.atol and _renormalised(w, ctx.expected(case)[at_w], rows, tol)
            ctx.fail(case, f"over its window, weights{list(at)} divided by the factor the contract puts on the softmax "
                     f"sum to {sums[at].item():.6g}, not 1 (the row itself sums to {raw:.6g})"
                     + ("; it was renormalised after the factor" if renormalised else ""),
                     symptom="gaussian_renormalised" if renormalised else None)


def _renormalised(w, expected, rows, tol) -> bool:
    """The learner's weights are the expected ones divided by their row's sum (renormalised after the factor), on
    every row with an allowed key: not merely rows that sum to 1 (a factor applied before the softmax does that too)."""
    expected = expected.to(torch.float64)
    total = expected.sum(-1, keepdim=True)
    if torch.allclose(total[rows], torch.ones_like(total[rows])):
        return False  # rows the factor leaves summing to 1: renormalising changes nothing there
    scaled = expected / torch.where(total == 0, 1, total)  # a row with no allowed key stays 0
    return bool(((w - scaled).abs() <= 10 * (tol.atol + tol.rtol * scaled.abs())).all())


def _needs(p):
    return None if p.weights_index is not None else "an output with role 'weights'"


register(Check("window_weights", "weights 0 outside an input-dependent window; softmax over it", {"base": group_base},
               check_window_weights, options=Window, needs=_needs, names=("gaussian_renormalised",)))
