"""The symptoms the general calls (the base group, parity_float64's) show: detectors that name a catalogued mistake
only when the evidence is certain and explains every failing call they look at, and `evidence`, what the results
show in words when no mistake can be named:
  - rows with no allowed key: NaN exactly there (and right elsewhere), or uniform there;
  - rows that fail to sum to 1 only where every valid score is very negative (a fill of 0);
  - rows that sum to a whole number above 1 (each chunk normalised on its own);
  - only calls of some masking forms fail (the mask rule names the mistake those forms show);
  - calls with block settings lose a trailing run of rows or keys (the last, partial block dropped);
  - weights that sum to 1 over the queries instead of the keys;
  - float64 results off by float32 rounding only (a float32 constant or cast inside);
  - outputs (no weights) right up to one factor below 1 per row (an epsilon added to a denominator).
"""
from __future__ import annotations

import torch

from ..compare import mismatch, tolerance, usage
from ..context import valid_mask
from ..registry import Symptom
from ...masks import rule


def _ok(ctx, case):
    res = ctx.got.get(case.key)
    return res if res is not None and res.has_outputs else None


def _weights(ctx, case):
    """The learner's and the reference's weights (float64), or None when absent or of another shape."""
    res = _ok(ctx, case)
    ref = ctx.ref.get(case.key)
    at = ctx.problem.weights_index
    if res is None or ref is None or at is None:
        return None
    w, e = res.outputs[at].to(torch.float64), ref.outputs[at].to(torch.float64)
    return (w, e) if w.shape == e.shape else None


def _right(ctx, case) -> bool:
    """Every output of the call came back and matches the reference (float64 tolerance)."""
    res, ref = _ok(ctx, case), ctx.ref.get(case.key)
    if res is None or ref is None:
        return False
    return all(mismatch("", g, e, tolerance("float64")) is None for g, e in zip(res.outputs, ref.outputs))


def _plain(case) -> bool:
    return not case.tags & {"negative", "block"}


def _kinds(ctx) -> tuple[set, set]:
    """(masking kinds with a plain base call that fails, kinds whose plain base calls are all right)."""
    bad, seen = set(), set()
    for case in ctx.of("base"):
        if _plain(case):
            seen.add(case.lens)
            if not _right(ctx, case):
                bad.add(case.lens)
    return bad, seen - bad


def _tail_block_lost(problem, ctx) -> bool:
    """Calls with block settings fail only on a trailing run of rows, keys or (b, i, j) triples, while every
    plain call is right: the last, partial block was dropped."""
    blocks = [c for c in ctx.of("base") if "block" in c.tags]
    if not blocks or not all(_right(ctx, c) for c in ctx.of("base") if _plain(c)):
        return False
    lost = False
    for case in blocks:
        pair = _weights(ctx, case)
        if pair is None:
            return False
        w, e = pair
        tol = tolerance("float64")
        bad = ~((w - e).abs() <= tol.atol + tol.rtol * e.abs())  # (B, Tq, Tk)
        if not bad.any():
            continue
        # rows with fewer than 2 valid keys are right whatever their scores: they tell nothing either way
        telling = valid_mask(problem, case).expand(e.shape).sum(-1) >= 2  # (B, Tq)
        rows = bad.any(-1)

        def suffix(wrong, tell):  # among the telling entries: right, right, ..., wrong, wrong
            seq = wrong[tell].long()
            return bool(seq.numel()) and bool((seq[1:] >= seq[:-1]).all())

        if not (suffix(bad.reshape(-1), telling[..., None].expand(bad.shape).reshape(-1))
                or suffix(rows.reshape(-1), telling.reshape(-1))
                or all(suffix(r, t) or not r.any() for r, t in zip(rows, telling))
                or all(suffix(k, k | True) or not k.any() for k in bad.any(-2))):
            return False
        lost = True
    return lost


def _empty_rows(problem, ctx) -> str | None:
    """"nan" or "uniform" when every base call's rows with no allowed key are all NaN (or all 1/Tk) and every
    other row matches the reference; None otherwise."""
    seen, kinds = 0, set()
    for case in ctx.of("base"):
        pair = _weights(ctx, case)
        if pair is None:
            if _ok(ctx, case) is None and case.key in ctx.got:
                return None
            continue
        w, e = pair
        empty = ~valid_mask(problem, case).expand(e.shape).any(-1)
        if not empty.any():
            if usage(w, e, tolerance("float64")) > 1:
                return None
            continue
        if not torch.isfinite(w[~empty]).all() or usage(w[~empty], e[~empty], tolerance("float64")) > 1:
            return None
        rows = w[empty]
        seen += 1
        if torch.isnan(rows).all():
            kinds.add("nan")
        elif torch.allclose(rows, torch.full_like(rows, 1.0 / w.shape[-1])):
            kinds.add("uniform")
        else:
            return None
    return kinds.pop() if seen and len(kinds) == 1 else None


def _only_negative_rows_lost(ctx) -> bool:
    """The calls whose valid scores are all far below 0 fail to sum to 1, only in rows with a masked key (a fill value
    acts on masked keys alone: a row lost with every key allowed is lost otherwise, an exp that underflows); every
    other base call is right."""
    negative = [c for c in ctx.of("base") + ctx.of("stable") if "negative" in c.tags]
    if not negative:
        return False
    lost = 0
    for case in negative:
        pair = _weights(ctx, case)
        if pair is None:
            return False
        w, _ = pair
        rows = (w.sum(-1) - 1).abs() > 1e-3
        if (rows & valid_mask(ctx.problem, case).expand(w.shape).all(-1)).any():
            return False
        lost += bool(rows.any())
    others_right = all((pair := _weights(ctx, c)) is not None and usage(*pair, tolerance("float64")) <= 1
                       for c in ctx.of("base") if "negative" not in c.tags)
    return bool(lost) and others_right


def _rows_sum_to_chunk_counts(problem, ctx) -> bool:
    """Some rows sum to a whole number >= 2 and every row with a valid key sums to a whole number >= 1."""
    above = False
    for case in ctx.of("base"):
        pair = _weights(ctx, case)
        if pair is None:
            continue
        w, _ = pair
        rows = valid_mask(problem, case).expand(w.shape).any(-1)
        sums = w.sum(-1)[rows]
        if not torch.isfinite(sums).all() or ((sums - sums.round()).abs() > 1e-6).any() or (sums < 0.5).any():
            return False
        above |= bool((sums > 1.5).any())
    return above


def _sums_along_wrong_axis(ctx) -> bool:
    """Some unmasked base call's weights fail to sum to 1 over keys but do sum to 1 over queries."""
    found = False
    for case in ctx.of("base"):
        res = _ok(ctx, case)
        at = ctx.problem.weights_index
        if case.lens != "none" or res is None or case.cfg["Tq"] == case.cfg["Tk"] or at is None:
            continue
        w = res.outputs[at].to(torch.float64)
        if w.dim() < 2:
            continue
        one = torch.ones((), dtype=torch.float64)
        if torch.allclose(w.sum(-1), one, atol=1e-6):
            return False
        found |= torch.allclose(w.sum(-2), one, atol=1e-6)
    return found


def _float32_rounding_only(ctx) -> bool:
    """Every float64 base call is within float32's tolerance of the reference (or, where the computation amplifies
    rounding, as RoPE's large angles do, within ten times the reference's own error when run in float32), and some
    exceed float64's."""
    worst = 0.0
    for case in ctx.of("base"):
        res, ref = _ok(ctx, case), ctx.ref.get(case.key)
        if res is None or ref is None:
            return False
        in32 = None
        for i, (g, e) in enumerate(zip(res.outputs, ref.outputs)):
            if g.shape != e.shape or g.dtype != torch.float64 or not torch.isfinite(g).all():
                return False
            if usage(g, e, tolerance("float32")) > 1:
                in32 = _in_float32(ctx, case) if in32 is None else in32
                if in32 is False or (g - e).abs().max() > 10 * (in32[i] - e).abs().max():
                    return False
            worst = max(worst, usage(g, e, tolerance("float64")))
    return worst > 1


def _in_float32(ctx, case):
    """The reference's outputs of the call run in float32 (as float64), or False where it cannot run so."""
    from ..reference import reference
    from ...draw.scenarios import cast
    from ...run.harness import execute
    from ...run.hooks import for_reference

    if case.call.get("device", "cpu") != "cpu" or case.call.get("train"):
        return False
    try:
        out = execute(for_reference(cast(case.call, "float32")), reference(ctx.problem))["outputs"][0]
    except Exception:  # noqa: BLE001 - no float32 run, no evidence
        return False
    return [o.to(torch.float64) for o in out]


EPSILON_SHRINK = 1e-2
"""The most an epsilon in a denominator shrinks a row by: eps / (phi(q) . z), about 1e-4 at most for the drawn inputs
and the epsilons code uses (1e-8 to 1e-5); a row shrunk by more has a denominator too large by a term of its own."""


def row_factor(problem, ctx) -> float | None:
    """The smallest factor where every wrong general call is right up to one factor per row, each in (0, 1] (something
    added to each row's denominator); None where the wrong calls show no such factors. Weights that sum to 1 never show
    this. Computed once per judging run (ctx.scratch): the epsilon symptom and the evidence both ask."""
    if ("row_factor",) not in ctx.scratch:
        ctx.scratch[("row_factor",)] = _row_factor(problem, ctx)
    return ctx.scratch[("row_factor",)]


def _row_factor(problem, ctx) -> float | None:
    if problem.weights_index is not None:
        return None
    smallest = None
    for case in ctx.of("base"):
        res, ref = _ok(ctx, case), ctx.ref.get(case.key)
        if res is None or ref is None or _right(ctx, case):
            continue
        g, e = res.outputs[0].to(torch.float64), ref.outputs[0].to(torch.float64)
        if g.shape != e.shape or g.dim() < 2 or not bool(torch.isfinite(g).all()):
            return None
        norm = (e * e).sum(-1, keepdim=True)
        ratio = torch.where(norm > 0, (g * e).sum(-1, keepdim=True) / norm.clamp_min(1e-300), torch.ones_like(norm))
        if usage(g, ratio * e, tolerance("float64")) > 1 or not bool(((ratio > 0) & (ratio <= 1 + 1e-12)).all()):
            return None
        low = float(ratio.min())
        smallest = low if smallest is None else min(smallest, low)
    return smallest


def _rows_shrunk_slightly(problem, ctx) -> bool:
    """Rows shrunk by one factor each, none by more than an epsilon would (EPSILON_SHRINK)."""
    factor = row_factor(problem, ctx)
    return factor is not None and factor >= 1 - EPSILON_SHRINK


def _empty(problem, ctx, failing):
    rows = _empty_rows(problem, ctx)
    return {"nan": ("nan_rows",), "uniform": ("uniform_rows",)}.get(rows)


def _forms(problem, ctx, failing):
    """Only calls of some masking forms fail: the problem's mask rule says which mistake that shows."""
    found = rule(problem).symptoms.get(frozenset(_kinds(ctx)[0]))
    return (found,) if found else None


SYMPTOMS = (
    Symptom(_empty, ("nan_rows", "uniform_rows")),
    Symptom(lambda p, ctx, failing: ("fill_zero",) if _only_negative_rows_lost(ctx) else None, ("fill_zero",)),
    Symptom(lambda p, ctx, failing: ("per_chunk_softmax",) if _rows_sum_to_chunk_counts(p, ctx) else None,
            ("per_chunk_softmax",)),
    Symptom(_forms, None, confirm=True),  # only some masking forms fail: a pattern several mistakes share
    Symptom(lambda p, ctx, failing: ("last_chunk_dropped",) if _tail_block_lost(p, ctx) else None,
            ("last_chunk_dropped",)),
    Symptom(lambda p, ctx, failing: ("wrong_axis", "softmax_wrong_axis") if _sums_along_wrong_axis(ctx) else None,
            ("wrong_axis", "softmax_wrong_axis")),
    Symptom(lambda p, ctx, failing: ("epsilon",) if _rows_shrunk_slightly(p, ctx) else None, ("epsilon",)),
    Symptom(lambda p, ctx, failing: ("float32_inside", "fixed_dtype", "float32_angles")
            if "parity_float64" in failing and _float32_rounding_only(ctx) else None,
            ("float32_inside", "fixed_dtype", "float32_angles")),
)
"""In order: the first that sees its symptom decides (judge/registry.Symptom)."""
