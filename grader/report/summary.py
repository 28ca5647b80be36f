"""The score table (the same for `pytest` and `attnkit grade`) and the JSON report."""
from __future__ import annotations

import json
from pathlib import Path

from ..files import atomic_write
from ..results import Report
from ..run.inbox import one_line
from .term import bar, paint

MARK = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERR!"}
STATUS = {"passed": "passed", "failed": "failed", "not_started": "not started"}


def _pts(score, max_score) -> str:
    return f"{score:g}/{max_score:g}"


def table(report: Report, width: int = 88, colour: bool = False, checks: bool | str = True,
          labels: dict | None = None) -> str:
    """One line per problem and per check, then the total; colour only if asked. `checks`: False for no check
    lines, "started" for check lines under started problems only (a problem not started is one line). `labels`:
    {problem id: a status word of the caller's} (watch's "syntax error")."""
    cuda = "CUDA" if report.devices.get("cuda") else "CPU only: CUDA checks skipped"
    rule = ("─" if colour else "-") * width
    lines = [f"attnkit: {one_line(report.impl, 500)} (seed {report.seed}, {cuda})", rule]  # a path: maybe a learner's name
    for p in report.problems:
        word = (labels or {}).get(p.id, STATUS[p.status])
        status = paint(f"{word:<{width - 52}}", p.status, colour)
        lines.append(f"{paint(f'{p.id:<44}', 'bold', colour)}{status}{_pts(p.score, p.max_score):>8}")
        if checks is True or (checks == "started" and p.status != "not_started"):
            lines += check_lines(p, width, colour)
    lines += [rule, f"{'total':<{width - 8}}{_pts(report.score, report.max_score):>8}"]
    return "\n".join(lines)


def check_lines(problem, width: int = 88, colour: bool = False) -> list[str]:
    """One line per check of a problem (mark, id, title, points), then what its source uses."""
    lines = []
    for c in problem.checks:
        pts = "-" if c.status == "skipped" else _pts(c.score, c.max_score)
        title = f"{c.title[: width - 35]:<{width - 33}}"
        lines.append(f"  {paint(MARK[c.status], c.status, colour)}  {c.id:<16} {title}{pts:>8}")
    return lines + uses_lines(problem)


def uses_lines(problem) -> list[str]:
    """What the source uses that the grader reads it for (results.Use), one line each: "uses (file line N): X"."""
    return [f"  {'USES' if u.refused else 'uses'}  ({u.file} line {u.line}): {u.what}"
            + ("; refused here" if u.refused else "") for u in problem.uses]


def progress(report: Report, colour: bool = False) -> str:
    passed = sum(p.status == "passed" for p in report.problems)
    return f"{bar(report.score, report.max_score, on=colour)}, {passed}/{len(report.problems)} problems passed"


def failures(report: Report, max_lines: int = 12) -> str:
    """The feedback of every failing problem (report/feedback.py: each mistake's block once, the checks it explains
    under it); a problem not started gets one line."""
    from .feedback import problem_text

    out = []
    for p in report.problems:
        if p.status == "not_started":
            out.append(f"{p.id}: {p.checks[0].message}" if p.checks else p.id)
        elif any(c.status in ("failed", "error") for c in p.checks):
            out.append(problem_text(p, max_lines))
    return "\n".join(out)


def to_json(report: Report) -> dict:
    return {
        "impl": report.impl,
        "seed": report.seed,
        "score": report.score,
        "max_score": report.max_score,
        "devices": report.devices,
        "sandbox": report.sandbox,
        "memory": report.memory,
        **({"variant": report.variant} if report.variant else {}),  # only for a candidate's variant (--variant)
        "problems": [
            {
                "id": p.id, "status": p.status, "score": p.score, "max_score": p.max_score, "trouble": p.trouble,
                "checks": [
                    {"id": c.id, "status": c.status, "score": c.score, "max_score": c.max_score,
                     "message": c.message, "mistake": c.mistake}
                    for c in p.checks
                ],
                "uses": [{"capability": u.capability, "file": u.file, "line": u.line, "what": u.what,
                          "refused": u.refused} for u in p.uses],
                **({"departure": p.departure} if p.departure else {}),
                **({"unexplained": p.unexplained} if p.unexplained else {}),
            }
            for p in report.problems
        ],
    }


def write_json(report: Report, path: Path) -> None:
    """Atomically: a reader (or a hostile process) never sees a half-written report."""
    atomic_write(path, json.dumps(to_json(report), indent=2) + "\n")


def next_step(report: Report) -> str:
    """What to do next, in one or two lines: the first problem (in track order) that is not passed yet."""
    todo = next((p for p in report.problems if p.status != "passed"), None)
    if todo is None:
        return "Next: every graded problem passes; `attnkit list` shows the whole track."
    verb = "fill in" if todo.status == "not_started" else "fix"
    return (f"Next: {verb} {todo.id}.py, then `pytest -k {todo.id}` (`-v` shows every check); "
            f"`attnkit hint {todo.id}` gives a hint.")
