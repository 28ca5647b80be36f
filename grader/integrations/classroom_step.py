"""`attnkit classroom grade PROBLEM`: one step of the Classroom workflow: grade one problem once, say it, hand it on.

It prints the problem's table and what to fix (the same as `attnkit grade`), then one line with the points, and
writes the result that Classroom's reporter (classroom-resources/autograding-grading-reporter) reads from the step's
output `result`: base64 JSON, one test per check with its own points, so that Classroom's total is the table's. The
maximum is the problem's CPU points whatever happens; a grader error scores 0 there. The step always writes a result
(the reporter fails on a missing one) and exits 0: a failing problem is a result, not a failed step.
"""
from __future__ import annotations

import base64
import json
import os
import traceback
from pathlib import Path

from .classroom import cpu_points
from ..problems import get

STATUS = {"passed": "pass", "failed": "fail", "error": "error"}


def result(pid: str, report) -> dict:
    """The reporter's runner result for `pid` in `report` (one test per check that ran)."""
    p = report.problem(pid)
    tests = [{"name": f"{pid}: {c.id}", "status": STATUS[c.status], "score": c.score,
              "message": (c.message.splitlines() or [""])[0][:300], "test_code": "", "filename": "", "line_no": 0,
              "duration": 0} for c in p.checks if c.status != "skipped"]
    return {"version": 1, "status": "pass" if p.status == "passed" else "fail", "max_score": cpu_points(get(pid)),
            "tests": tests}


def failed(pid: str, why: str) -> dict:
    """The result where the grading itself failed: no points, the reason in the log."""
    return {"version": 1, "status": "error", "max_score": cpu_points(get(pid)),
            "tests": [{"name": pid, "status": "error", "score": 0, "message": why[:300], "test_code": "",
                       "filename": "", "line_no": 0, "duration": 0}]}


def run(pid: str, impl: Path, lang: str | None = None) -> int:
    from ..grading import grade
    from ..report.summary import failures, table

    try:
        report = grade(impl, [pid], lang=lang)
    except Exception as exc:  # noqa: BLE001 - the reporter needs a result whatever happened
        print(traceback.format_exc().strip())
        data = failed(pid, f"the grader failed: {type(exc).__name__}")
    else:
        print(table(report))
        details = failures(report)
        if details:
            print("\nWhat to fix:\n" + details)
        data = result(pid, report)
    score = sum(t["score"] for t in data["tests"])
    print(f"\n{pid}: {score:g}/{data['max_score']:g} points (this step's result for GitHub Classroom)")
    encoded = base64.b64encode(json.dumps(data).encode()).decode()
    out = os.environ.get("GITHUB_OUTPUT")
    if out:
        with open(out, "a") as f:
            f.write(f"result={encoded}\n")
    return 0
