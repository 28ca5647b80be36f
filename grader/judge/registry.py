"""The registry of checks. A check is one stage: an id, a title, the groups of calls it reads (each a
builder `(problem, seed) -> [Case]`, by name), its judge `(Context) -> None` that raises Failed, and what
it needs of a spec (roles, hooks). Stages register themselves (grader/judge/stages/); a spec lists the
checks that apply to it, with their points."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import SpecError


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    groups: dict[str, Callable]  # group name -> builder (problem, seed) -> [Case]
    judge: Callable  # (Context) -> None, raising Failed
    needs_cuda: bool = False
    needs: Callable = field(default=lambda problem: None)  # problem -> what it lacks for this check (None: nothing)
    diagnose: bool = True  # False: a verdict on the source, not on results; no catalogued mistake is looked for


CHECKS: dict[str, Check] = {}
BUILDERS: dict[str, Callable] = {}
"""Every group name in use -> its one builder: two checks that read a group share its calls."""


def register(check: Check) -> Check:
    if check.id in CHECKS:
        raise SpecError(f"check id {check.id!r} is registered twice")
    for name, builder in check.groups.items():
        if BUILDERS.setdefault(name, builder) is not builder:
            raise SpecError(f"check {check.id!r}: group {name!r} already has another builder")
    CHECKS[check.id] = check
    return check


def validate_checks(problem) -> None:
    """Every check a spec gives points to is registered and applies to the spec's roles and hooks
    (else a SpecError naming the spec and the field)."""
    where = f"spec grader/problems/{problem.id}.py: field points"
    for cid in problem.points:
        if cid not in CHECKS:
            raise SpecError(f"{where}: unknown check id {cid!r} (known: {', '.join(sorted(CHECKS))})")
        lacks = CHECKS[cid].needs(problem)
        if lacks:
            raise SpecError(f"{where}: check {cid!r} needs {lacks}")
