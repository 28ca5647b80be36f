"""What a wrong scale of the scores shows, read off the learner's own results: every wrong general float64 call comes back
exactly as the reference's does with the queries multiplied by one factor c (the scores scaled by c times the
contract's scale), c fitted on the first wrong call and said as sqrt(X/Y) of two of the call's sizes (or 1/X, or a
constant) where that rule reproduces every wrong call. Only for problems the stage trace does not follow (traced=False:
the trace says a traced problem's extra factor itself), and only with a query argument; a problem whose reference is
not of that form finds no factor and says nothing. It runs the trusted reference in the grader, never the learner."""
from __future__ import annotations

import math
import time

import torch

from ..compare import tolerance, usage
from ..reference import reference
from ...model.roles import documented_dims

LOW, HIGH, GRID = 1 / 64, 64.0, 25
"""The factors searched: a grid even in log c from LOW to HIGH (steps of 1.41x), then a golden-section search between
the best point's neighbours."""

STEPS, PROBE = 60, 20
"""Golden-section steps: the bracket shrinks to 0.618^60 (1e-12) of a grid step, below float64's tolerance. Where the
error does not fall a hundredfold over the PROBE steps after the fifth (an exact fit's falls with the bracket, 0.618^20
= 7e-5), none exists and the search stops."""

MOST = 6
"""Wrong calls tried at most: the rule is fitted on the first and proved on the others (their sizes differ)."""

BUDGET = 2.0
"""Seconds of the grader's CPU the search may take; a reference slower than that over a search is not searched."""


def evidence(problem, ctx) -> list[str]:
    at = next((i for i, a in enumerate(problem.args) if a.role == "query"), None)
    if problem.traced or at is None:
        return []
    wrong = _wrong(ctx, at)[:MOST]
    if not wrong:
        return []
    run = _runner(problem)
    first = wrong[0]
    start = time.process_time()
    if run(first, at, 1.0) is None or (time.process_time() - start) * (GRID + STEPS + 2) > BUDGET:
        return []  # a reference too slow to run a hundred times here (an interpreted kernel): no search
    c = _fit(lambda f: _error(run(first, at, f), ctx.got[first.key].outputs))
    if c is None or abs(c - 1) < 1e-6:
        return []
    held = [words for words, rule in _rules(_sizes(problem, first), c)
            if all((f := rule(_sizes(problem, case))) is not None
                   and _error(run(case, at, f), ctx.got[case.key].outputs) <= 1 for case in wrong)]
    sized = [words for words in held if not words[0].isdigit()]  # the constant rule's words are its value
    if len(sized) == 1:
        said, scale = sized[0], _expected_words(problem, sized[0])
    elif sized:
        said, scale = f"{' or '.join(sized)} (the calls that go wrong do not tell which)", ""
    elif held:
        said, scale = "one constant, whatever the sizes,", ""
    else:
        return []
    return [f"every parity call that goes wrong comes back exactly as the reference's does with the queries multiplied "
            f"by {said} ({c:.6g} on the first): the scores are scaled by "
            + (scale or "that factor times the contract's scale")]


def _wrong(ctx, at: int) -> list:
    """The plain float64 general calls whose outputs came back, of the right shapes, and wrong."""
    from .parity_symptoms import _plain, _right

    out = []
    for case in ctx.of("base"):
        got, ref = ctx.got.get(case.key), ctx.ref.get(case.key)
        args = case.call.get("args") or []
        if not _plain(case) or got is None or ref is None or not got.has_outputs or at >= len(args) \
                or not isinstance(args[at], torch.Tensor) or len(got.outputs) != len(ref.outputs) \
                or any(g.shape != r.shape for g, r in zip(got.outputs, ref.outputs)):
            continue
        if not _right(ctx, case):
            out.append(case)
    return out


def _runner(problem):
    from ...run.answer import Answer
    from ...run.harness import execute
    from ...run.hooks import for_reference

    target = reference(problem)

    def run(case, at: int, factor: float):
        call = for_reference(case.call)
        args = list(call["args"])
        args[at] = args[at] * factor
        try:
            return Answer.of({"ok": True, **execute({**call, "args": args}, target)}).outputs
        except Exception:  # noqa: BLE001 - a factor the reference refuses: no evidence there
            return None

    return run


def _error(expected, got) -> float:
    """The largest error of `got` against `expected` as a fraction of float64's tolerance (inf where they cannot be
    compared); entries expected non-finite must come back the same (inf as inf, NaN as NaN)."""
    if expected is None or len(expected) != len(got):
        return math.inf
    worst = 0.0
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            return math.inf
        g, e = g.detach().to(torch.float64), e.detach().to(torch.float64)
        finite = torch.isfinite(e)
        odd_g, odd_e = g[~finite], e[~finite]
        if not ((odd_g == odd_e) | (torch.isnan(odd_g) & torch.isnan(odd_e))).all() or not torch.isfinite(g[finite]).all():
            return math.inf
        if finite.any():
            worst = max(worst, usage(g[finite], e[finite], tolerance("float64")))
    return worst


def _fit(error) -> float | None:
    """The factor c that makes error(c) <= 1 (the learner's results within float64's tolerance), or None."""
    grid = [LOW * (HIGH / LOW) ** (i / (GRID - 1)) for i in range(GRID)]
    errors = [error(c) for c in grid]
    best = min(range(GRID), key=lambda i: errors[i])
    if not math.isfinite(errors[best]):
        return None
    lo, hi = math.log(grid[max(best - 1, 0)]), math.log(grid[min(best + 1, GRID - 1)])
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    ea, eb = error(math.exp(a)), error(math.exp(b))
    for step in range(STEPS):
        if step == 5:
            early = min(ea, eb)
        if step == 5 + PROBE and min(ea, eb) > early / 100:
            return None  # the error levels off above the tolerance: no factor reproduces the results
        if ea <= eb:
            hi, b, eb = b, a, ea
            a = hi - ratio * (hi - lo)
            ea = error(math.exp(a))
        else:
            lo, a, ea = a, b, eb
            b = lo + ratio * (hi - lo)
            eb = error(math.exp(b))
    c = math.exp(a if ea <= eb else b)
    return c if min(ea, eb) <= 1 else None


def _sizes(problem, case) -> dict:
    """The call's sizes that the problem's statement names ({name: value})."""
    named = documented_dims(problem)
    return {k: v for k, v in case.cfg.items() if k in named and type(v) is int and v > 0}


def _rules(sizes: dict, c: float):
    """(words, sizes -> factor) for each rule that gives c on these sizes: sqrt(X/Y), 1/X or X/Y of two sizes, sqrt(X)
    or 1/sqrt(X) of one, else the constant c itself."""
    near = lambda f: abs(f - c) <= 1e-6 * c  # noqa: E731
    names = sorted(sizes)
    found = []
    for x in names:
        for f, words in ((lambda s, x=x: math.sqrt(s[x]), f"√{x}"), (lambda s, x=x: 1 / math.sqrt(s[x]), f"1/√{x}"),
                         (lambda s, x=x: 1 / s[x], f"1/{x}"), (lambda s, x=x: float(s[x]), x)):
            if near(f(sizes)):
                found.append((words, lambda s, f=f, x=x: f(s) if x in s else None))
        for y in names:
            if x == y:
                continue
            for f, words in ((lambda s, x=x, y=y: math.sqrt(s[x] / s[y]), f"√({x}/{y})"),
                             (lambda s, x=x, y=y: s[x] / s[y], f"{x}/{y}")):
                if near(f(sizes)) and sizes[x] != sizes[y]:
                    found.append((words, lambda s, f=f, x=x, y=y: f(s) if x in s and y in s else None))
    return found + [(f"{c:.6g}", lambda s: c)]


def _expected_words(problem, words: str) -> str:
    """Where the statement scales by 1/sqrt(d) and the factor is one of d's: the scale the code uses instead."""
    text = " ".join(m.statement for m in problem.methods).replace(" ", "")
    if "sqrt(d)" not in text:
        return ""
    for d in ("d", "dq", "dk"):
        if words.startswith(f"√({d}/") and words.endswith(")"):
            return f"1/√{words[len(d) + 3:-1]} where the contract scales by 1/√d"
        if words == f"√{d}":
            return "1 (not at all) where the contract scales by 1/√d"
        if words == f"1/√{d}":
            return f"1/{d} where the contract scales by 1/√d"
    return ""
