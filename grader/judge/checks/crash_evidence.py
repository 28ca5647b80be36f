"""What the general calls show when the learner's code raises on some of them: the simplest rule that separates the
calls it raises on from those it runs (two dimensions unequal, a constructor setting), said as a finding of its own,
so that a crash on part of the contract's inputs is not taken for the mistake behind the wrong values elsewhere."""
from __future__ import annotations

from itertools import combinations


def _raised(ctx, case) -> str | None:
    res = ctx.got.get(case.key)
    if res is None or res.ok or res.error is None or res.error.type == "NotImplementedError":
        return None
    return res.error.type


def _rules(cases):
    """(words, predicate) candidates over the calls' dimensions and constructor settings."""
    dims = sorted({k for c in cases for k, v in c.cfg.items() if isinstance(v, int)})
    for a, b in combinations(dims, 2):
        yield f"{a} != {b}", lambda c, a=a, b=b: c.cfg.get(a) != c.cfg.get(b)
    for key in sorted({k for c in cases for k in c.variant}):
        for value in sorted({repr(c.variant.get(key)) for c in cases}):
            yield f"{key}={value}", lambda c, key=key, value=value: repr(c.variant.get(key)) == value


def evidence(problem, ctx) -> list[str]:
    """One line where the learner's code raises on some general calls and runs on others, split by a simple rule."""
    cases = [c for c in ctx.of("base") if not c.must_raise and ctx.got.get(c.key) is not None]
    raised = {c.key: _raised(ctx, c) for c in cases}
    crashed = [c for c in cases if raised[c.key]]
    if not crashed or len(crashed) == len(cases):
        return []
    for words, rule in _rules(cases):
        if all(rule(c) == bool(raised[c.key]) for c in cases):
            kinds = sorted({raised[c.key] for c in crashed})
            return [f"your code raises {', '.join(kinds)} on every call with {words} ({len(crashed)} of {len(cases)} "
                    f"calls) and runs on every other: the contract allows those calls; what is wrong elsewhere is "
                    f"another matter"]
    return []
