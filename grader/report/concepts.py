"""The interviewer's summary by concept: which ideas of attention the candidate's code got right, read from the
checks' verdicts. The map from checks to concepts is here, once, as data."""
from __future__ import annotations

from .doc import Code, Heading, Para, Table

MULTI_HEAD = ("multihead_attention", "multihead_additive_attention", "grouped_query_attention")

CONCEPTS: dict[str, list[tuple[str, tuple[str, ...] | None]]] = {
    # concept: [(check id, the problems where it counts for this concept; None: all)]
    "masking": [("masking", None), ("weight_sums", None)],
    "numerical stability": [("stability", None), ("parity_float32", None), ("cuda_half", None)],
    "shapes and heads": [("shapes", None), ("parameters", None), ("parity_float64", MULTI_HEAD)],
    "caching": [("kv_cache", None)],
    "memory": [("memory", None), ("block_invariance", None)],
}


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
