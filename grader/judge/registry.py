"""The registry of checks. A check is one unit (grader/judge/checks/<id>.py): an id, a title, the groups of calls it
reads (each a builder `(problem, seed) -> [Case]`, by name), its judge `(Context) -> None` that raises Failed, and in
the same place what else it needs: worker hooks on every call of a problem that has it (`hooks`), extra expected
values (`expected`), typed options a spec fills (`options`), the symptom detectors it contributes (`symptoms`, each
with the catalogued mistake ids it may name) and what it needs of a spec (`needs`). Units register themselves; a
spec lists the checks that apply to it, with their points, and their options by check id."""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Callable

from ..errors import SpecError


@dataclass(frozen=True)
class Symptom:
    """A detector `(problem, ctx, failing check ids) -> None (nothing seen) or the mistake ids it sees, in order of
    preference`, and the mistake ids it may return (None: those of the problem's mask rule, grader/masks/)."""

    detect: Callable
    names: tuple[str, ...] | None
    confirm: bool = False  # a pattern, not a certainty: the name holds only where its variant reproduces the failures


@dataclass(frozen=True)
class Submission:
    """What a check that answers its own calls may read of the submission being graded."""

    impl: object  # its folder (a Path)
    limits: object  # run/sandbox.Limits of its workers
    timeout: float
    jailed: bool  # graded inside bubblewrap
    scan: object  # its source's findings for the problem (judge/scan/), or the reader's failure as text


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    groups: dict[str, Callable]  # group name -> builder (problem, seed) -> [Case]
    judge: Callable  # (Context) -> None, raising Failed
    needs_cuda: bool = False
    # (jailed) -> why this machine cannot judge the check (decided by the grader before any submission runs, like a
    # missing GPU: skipped, never a failure), or None
    unavailable: Callable | None = None
    needs: Callable = field(default=lambda problem: None)  # problem -> what it lacks for this check (None: nothing)
    diagnose: bool = True  # False: a verdict on the source, not on results; no catalogued mistake is looked for
    hooks: Callable | None = None  # (problem, options) -> {hook name: options} for every call of the problem
    expected: Callable | None = None  # (problem, cases, target, refs) -> None: extra reference values, into refs
    options: type | None = None  # a dataclass: the spec's options["<id>"] as keyword arguments, validated at load
    symptoms: tuple[Symptom, ...] = ()  # what its evidence shows, in mistake ids (diagnose/ loops over them)
    contract: Callable | None = None  # (problem, options) -> lines of the problem's contract section (docs/contract.md)
    enforces: str = ""  # what of the contract its calls enforce in the worker, in words ("a memory bound")
    evidence: Callable | None = None  # (problem, ctx) -> [lines]: what its results show, where no mistake is named
    names: tuple[str, ...] = ()  # symptom ids its judge may give with a failure (Failed.symptom)
    general: bool = False  # its calls are the general ones: a mistake that explains another check must not miss
    # what the learner got wrong on them (diagnose/)
    explained_alone: bool = False  # its calls only build or reject: a mistake may explain it without the general ones
    # (problem, cases, Submission) -> a function giving {case key: result}: the grader answers the check's calls itself
    # (a fresh import, a reading of the source), never a worker; started before judging, collected at it
    answer: Callable | None = None
    # the interviewer's summary by concept (report/concepts.py): (concept, None or problem -> bool: where it counts)
    concepts: tuple = ()
    # (case, result) -> what the check measures of a call beside its values (None: not measured there), which two
    # results must share to agree (diagnose/: a catalogued mistake reproduces the learner's results only if it does)
    measure: Callable | None = None
    # (ctx, case) -> None, raising Failed where a call's outputs cannot count at all, for any check of the problem (the
    # kernels stage: what came back is not what the kernels computed); Context.outputs asks it of every result
    vouch: Callable | None = None
    rows_sum_to_one: bool = False  # its verdict holds each weight row with an allowed key to sum 1 (the public checks
    # ask it of their fixed example only where one of the problem's checks does: integrations/public.py)


CHECKS: dict[str, Check] = {}
BUILDERS: dict[str, Callable] = {}
"""Every group name in use -> its one builder: two checks that read a group share its calls."""


def loaded() -> dict[str, Check]:
    """Every registered check, the check units loaded first: the package judge/checks/ is found by name, as it finds
    its own units (and an extension's), so that the registry depends on no unit."""
    importlib.import_module(f"{__package__}.checks")
    return CHECKS


def register(check: Check) -> Check:
    if check.id in CHECKS:
        raise SpecError(f"check id {check.id!r} is registered twice")
    for name, builder in check.groups.items():
        if BUILDERS.setdefault(name, builder) is not builder:
            raise SpecError(f"check {check.id!r}: group {name!r} already has another builder")
    CHECKS[check.id] = check
    return check


def draw(problem, groups, seed: int) -> dict:
    """The cases of the named groups (each drawn by the builder its check declares), keyed by case key."""
    from ..draw.groups import build

    loaded()
    return build(problem, {name: BUILDERS[name] for name in groups}, seed)


def options(problem, check_id: str):
    """The typed options of check `check_id` for `problem` (its defaults where the spec gives none)."""
    check = loaded()[check_id]
    return check.options(**(problem.options or {}).get(check_id, {})) if check.options else None


def check_cases(ctx, check_id: str) -> list:
    """Every case the check's builders drew (whatever group name each case carries)."""
    groups = loaded()[check_id].groups
    return [c for c in ctx.cases.values() if c.builder in groups]


def general_cases(ctx, problem) -> list:
    """The cases of the problem's general checks (`general`), each once."""
    seen = {}
    for cid in problem.points:
        if loaded()[cid].general:
            seen.update({c.key: c for c in check_cases(ctx, cid)})
    return list(seen.values())


def grader_groups() -> set[str]:
    """Groups the grader answers itself (no worker result, no outputs)."""
    return {g for c in loaded().values() if c.answer is not None for g in c.groups}


def problem_hooks(problem) -> dict:
    """{hook name: options}: the worker hooks the problem's checks put on every call of the problem."""
    hooks = {}
    for cid in problem.points:
        check = loaded()[cid]
        if check.hooks is not None:
            hooks.update(check.hooks(problem, options(problem, cid)))
    return hooks


def with_hooks(problem, cases: dict) -> dict:
    """The cases, each call given the worker hooks of every check of the problem that declares some."""
    hooks = problem_hooks(problem)
    if hooks:
        for case in cases.values():
            case.call["hooks"] = {**hooks, **(case.call.get("hooks") or {})}
    return cases


def validate_checks(problem) -> None:
    """Every check a spec gives points to is registered and applies to the spec's roles and hooks, and every
    check's options the spec gives are those of a check it has, of the fields the check declares (else a SpecError
    naming the spec and the field)."""
    where = f"spec grader/problems/{problem.id}.py: field points"
    for cid in problem.points:
        if cid not in loaded():
            raise SpecError(f"{where}: unknown check id {cid!r} (known: {', '.join(sorted(loaded()))})")
    for cid in problem.points:
        lacks = loaded()[cid].needs(problem)
        if lacks:
            raise SpecError(f"{where}: check {cid!r} needs {lacks}")
    for cid, given in (problem.options or {}).items():
        field_ = f"spec grader/problems/{problem.id}.py: field options[{cid!r}]"
        if cid not in problem.points or loaded()[cid].options is None:
            raise SpecError(f"{field_}: options for a check the spec does not have, or that takes none")
        known = {f.name for f in dataclasses.fields(loaded()[cid].options)}
        unknown = set(given) - known
        if unknown:
            raise SpecError(f"{field_}: unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
        try:
            options(problem, cid)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{field_}: {exc}") from None
