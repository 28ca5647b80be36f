"""Recognising a mistake from what the learner's results show, before (and beside) reproduction: the engine.

The detectors are the checks' own (judge/registry.Symptom, declared by each check unit with the mistake ids it may
name, e.g. judge/checks/parity_symptoms.py); here they run in the order the spec lists its checks, and a name is
kept only where the problem (or a failing problem it imports) catalogues it. Also here: the parameters a module
has, compared with what each catalogued mistake's variant has, as a *kind* of difference (an extra bias, a missing
one, a weight of the transposed shape), so that a bias on W_k is named like the catalogue's bias on W_q.
"""
from __future__ import annotations

from ..judge.checks import CHECKS


def known_ids(problem, failing_deps) -> set[str]:
    from ..problems import get

    return {m.id for m in problem.mistakes} | {f"{d}:{m.id}" for d in failing_deps for m in get(d).mistakes}


def _known(ids, mid):
    for rid in (mid, *sorted(i for i in ids if i.endswith(f":{mid}"))):  # ours, then a failing import's
        if rid in ids:
            return rid
    return None


def certain(problem, ctx, failing: list[str]) -> tuple[str | None, bool]:
    """A catalogued mistake the error's shape leaves no doubt about, or None: the first detector of the problem's
    checks that sees its symptom decides (the first of its ids the catalogue has, or none); and whether the detector
    asks for the name to be confirmed by reproduction (registry.Symptom.confirm)."""
    ids = known_ids(problem, ctx.failing_deps)
    for cid in problem.points:
        for symptom in CHECKS[cid].symptoms:
            seen = symptom.detect(problem, ctx, failing)
            if seen:
                if symptom.names is not None and not set(seen) <= set(symptom.names):
                    raise ValueError(f"check {cid!r}: a detector named {seen}, not among its declared {symptom.names}")
                return next((r for r in (_known(ids, m) for m in seen) if r), None), symptom.confirm
    return None, False


def evidence(problem, ctx) -> list[str]:
    """What the results show, in words, for the learner to start from when no mistake is named: each check's."""
    return [line for cid in problem.points if CHECKS[cid].evidence for line in CHECKS[cid].evidence(problem, ctx)]


def parameter_kinds(params: dict, expected: dict) -> frozenset:
    """A difference of parameter sets as kinds: ("extra", "bias"), ("missing", "weight"), ("transposed", ""), a weight
    "larger" or "smaller" than the contract's (the direction matters: W_k sized E is larger), ..."""
    kinds = set()
    for name in set(params) - set(expected):
        kinds.add(("extra", name.rsplit(".", 1)[-1]))
    for name in set(expected) - set(params):
        kinds.add(("missing", name.rsplit(".", 1)[-1]))
    for name in set(params) & set(expected):
        got, want = list(params[name]), list(expected[name])
        if got != want:
            size = "larger" if _numel(got) > _numel(want) else "smaller" if _numel(got) < _numel(want) else "reshaped"
            kinds.add(("transposed" if got[::-1] == want else size, name.rsplit(".", 1)[-1]))
    return frozenset(kinds)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
