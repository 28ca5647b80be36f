"""The numbers of `attnkit class-report`: what grade-batch's results say about a class (the page: class_page.py).

A problem a student has not begun (the stub, or no file) is *not started*, never a failure: it is counted apart and
left out of every rate and mean, so a class that has begun three problems is not shown as failing thirteen. A problem
that was begun and broke before any check ran (its import raised, it defines no such name) *did not load*: that is
counted among the started, and listed with the submissions that did not grade. Every text from a result file is
untrusted: the page escapes it; here it is only read, capped, and classified by the grader's own fields and sentences.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..errors import BadInput
from .not_started import UNTOUCHED, kind as not_started_kind, raised

KINDS = {  # a problem's `trouble` (the grader's own field: results.TROUBLES) as this page names it
    "timeout": "timed out",
    "crash": "crashed",
    "hostile": "hostile",
    "error": "grader error",
}
TROUBLE_DETAIL = {  # what each trouble means, in the grader's words, for the detail column
    "timed out": "the grader stopped its worker at the time limit per problem (--timeout)",
    "crashed": "its worker process died (a signal, or it exited) before answering every call",
    "hostile": "its worker sent the grader something that is not a result (refused, unread)",
    "grader error": "the grader failed on some check, not the learner's code: those points are left out",
}
LOAD_DETAIL = {  # a problem that did not load: not_started.kind's answer, in the grader's words
    "no_symbol": "its module defines no such name",
    "sandbox": "the grader could not prepare the submission (too large, or too many files)",
    "output": "importing it printed more than the output limit allows",
    "unloadable": "its module could not be loaded",
}
STATUSES = ("passed", "failed", "did not load", "not started")
TOP = 5  # mistakes listed per problem
MESSAGE = 600  # characters of a failed check's message kept for the student's section
MAX_BYTES = 50 << 20  # read of one result file (a cut-off file is not JSON: an error row)
IGNORED = ("source.json", "similarity.json")  # what grade-batch and similarity write beside the results


def load(results: Path) -> list[dict]:
    """Every result grade-batch wrote in `results` (one JSON per submission), in name order; each with `file`, its
    file's name. A file that is not a result is an error row, never left out."""
    if not results.is_dir():
        raise BadInput(f"{results}: not a results folder (what `attnkit grade-batch --out` writes)")
    rows = []
    for f in sorted(results.glob("*.json")):
        if f.name in IGNORED or f.is_symlink():
            continue
        try:
            with open(f, "rb") as handle:
                data = json.loads(handle.read(MAX_BYTES))
        except (OSError, ValueError):
            data = {"submission": f.stem, "error": "its result file is not JSON"}
        if not isinstance(data, dict) or not isinstance(data.get("submission", f.stem), str):
            data = {"submission": f.stem, "error": "its result file is not a grade-batch result"}
        rows.append({**data, "file": f.name})
    if not rows:
        raise BadInput(f"{results}: no results in it (run `attnkit grade-batch SUBMISSIONS --out {results}` first)")
    return rows


def status(problem: dict) -> str:
    """One of STATUSES, from the result's fields (a not-started reason only chooses among the grader's sentences)."""
    if problem.get("status") == "passed":
        return "passed"
    if problem.get("status") != "not_started":
        return "failed"
    return "not started" if _load_kind(problem) in UNTOUCHED else "did not load"


def _load_kind(problem: dict) -> str:
    checks = problem.get("checks") or [{}]
    try:
        return not_started_kind(str(problem.get("id")), str(checks[0].get("message", "")))
    except Exception:  # noqa: BLE001 - a problem this kit does not know: its reason cannot be read
        return "unloadable"


def _graded(row: dict) -> bool:
    return "error" not in row and isinstance(row.get("problems"), list)


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def stats(rows: list[dict]) -> dict:
    """The numbers on the page: scores, the roster, per-problem and per-check rates, mistakes, what did not grade."""
    graded = [r for r in rows if _graded(r)]
    problems: dict = {}
    checks: dict = {}
    mistakes: dict = {}
    troubles = [{"submission": str(r.get("submission", "?")), "kind": "not graded", "problem": "",
                 "detail": str(r.get("error", ""))[:300]} for r in rows if not _graded(r)]
    roster = []
    for r in rows:
        entry = {"submission": str(r.get("submission", "?")), "file": r.get("file"), "problems": {},
                 "score": _number(r.get("score")) if _graded(r) else None, "max_score": _number(r.get("max_score")),
                 "error": None if _graded(r) else str(r.get("error", ""))[:300]}
        roster.append(entry)
        for p in r.get("problems", []) if _graded(r) else []:
            pid, found = str(p.get("id")), status(p)
            failing = [{"id": str(c.get("id")), "message": str(c.get("message", ""))[:MESSAGE]}
                       for c in p.get("checks", []) if c.get("status") in ("failed", "error") and found != "not started"]
            failing = failing[:1] if found == "did not load" else failing  # each says the same: why it did not load
            entry["problems"][pid] = {"status": found, "score": _number(p.get("score")),
                                      "max_score": _number(p.get("max_score")), "failing": failing}
            tally = problems.setdefault(pid, {s: 0 for s in STATUSES} | {"shares": []})
            tally[found] += 1
            troubles += _troubles(entry["submission"], pid, p, found)
            if found == "not started":
                continue
            if _number(p.get("max_score")) > 0:
                tally["shares"].append(_number(p.get("score")) / _number(p.get("max_score")))
            for c in p.get("checks", []):  # a module that did not load was started: its checks failed
                if c.get("status") in ("skipped", "error"):
                    continue
                ce = checks.setdefault(f"{pid}: {c.get('id')}", {"graded": 0, "passed": 0})
                ce["graded"] += 1
                ce["passed"] += c.get("status") == "passed"
            made = {c["mistake"] for c in p.get("checks", []) if isinstance(c.get("mistake"), str)}
            mistakes.setdefault(pid, Counter()).update(made)  # a student counts once per mistake
    scores = [e["score"] for e in roster if e["score"] is not None]
    return {
        "submissions": len(rows), "graded": len(graded), "scores": scores,
        "max_score": max((e["max_score"] for e in roster if e["score"] is not None), default=0.0),
        "problems": {pid: _problem_numbers(v) for pid, v in problems.items()},
        "checks": {k: {**v, "rate": v["passed"] / v["graded"]} for k, v in checks.items()},
        "mistakes": {pid: c.most_common(TOP) for pid, c in mistakes.items() if c},
        "troubles": troubles, "roster": roster,
    }


def _problem_numbers(tally: dict) -> dict:
    """started (passed, failed, did not load), not started; the pass rate and mean partial score of the started."""
    shares = tally.pop("shares")
    started = tally["passed"] + tally["failed"] + tally["did not load"]
    mean = sum(shares) / len(shares) if shares else None
    return {**tally, "started": started, "rate": tally["passed"] / started if started else None, "mean": mean,
            "difficulty": None if mean is None else 1 - mean}


def _troubles(submission: str, pid: str, problem: dict, found: str) -> list[dict]:
    """The rows of the "did not grade" table for one problem: its trouble (the grader's field), or its failed load."""
    out = []
    trouble = problem.get("trouble")
    kind = KINDS.get(trouble) if isinstance(trouble, str) else None
    if kind:
        lost = [str(c.get("id")) for c in problem.get("checks", []) if c.get("status") in ("failed", "error")]
        detail = TROUBLE_DETAIL[kind] + (f"; checks without their points: {', '.join(lost)}" if lost else "")
        out.append({"submission": submission, "kind": kind, "problem": pid, "detail": detail[:300]})
    if found == "did not load":
        load = _load_kind(problem)
        detail = (f"its module raised {raised(pid, problem['checks'][0].get('message', ''))} on import"
                  if load == "import" else LOAD_DETAIL.get(load, LOAD_DETAIL["unloadable"]))
        out.append({"submission": submission, "kind": "did not load", "problem": pid, "detail": detail})
    return out
