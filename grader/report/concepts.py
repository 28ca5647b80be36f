"""The interviewer's summary by concept: which ideas of attention the candidate's code got right, read from the
checks' verdicts. Each check unit declares the concepts it counts for (judge/registry.Check.concepts)."""
from __future__ import annotations

from .doc import Code, Heading, Para, Table

NAMES = ("masking", "numerical stability", "shapes and heads", "caching", "memory")


def _map() -> dict[str, list[tuple[str, tuple[str, ...] | None]]]:
    """Concept -> [(check id, the problems where it counts for this concept; None: all)], from what each check unit
    declares (judge/registry.Check.concepts)."""
    from ..judge.registry import loaded
    from ..problems import all_problems

    out: dict[str, list] = {name: [] for name in NAMES}
    for cid, check in loaded().items():
        for name, applies in check.concepts:
            where = None if applies is None else tuple(p.id for p in all_problems() if applies(p))
            out.setdefault(name, []).append((cid, where))
    return out


CONCEPTS = _map()


def concept_checks(report) -> dict[str, list]:
    """Concept -> [(problem id, check)] of the graded checks of the problems started (skipped checks, and the grader's
    own errors, left out)."""
    out = {name: [] for name in CONCEPTS}
    for p in report.problems:
        if p.status == "not_started":
            continue
        for c in p.checks:
            if c.status not in ("passed", "failed"):
                continue
            for name, rules in CONCEPTS.items():
                if any(c.id == cid and (where is None or p.id in where) for cid, where in rules):
                    out[name].append((p.id, c))
    return out


def summary(report) -> list:
    """The report's blocks: one row per concept, with what failed."""
    rows = []
    for name, found in concept_checks(report).items():
        failed = [(pid, c) for pid, c in found if c.status == "failed"]
        verdict = "not graded here" if not found else "failed" if failed else "passed"
        where = [x for i, (pid, c) in enumerate(failed) for x in ([", "] if i else []) + [Code(f"{pid}: {c.id}")]]
        rows.append([name, verdict, f"{len(found) - len(failed)} of {len(found)}" if found else "-", where or "-"])
    return [Heading("Summary by concept", "concepts"),
            Para("Each concept's checks across the problems started (a problem not started is left out; "
                 "docs/checks.md says what each check verifies):"),
            Table(["concept", "verdict", "checks passed", "failed"], rows)]
