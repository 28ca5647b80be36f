"""Gradescope: `attnkit gradescope build OUT.zip` makes an autograder; inside it, `run` grades.

The autograder zip holds setup.sh (installs the CPU build of torch, then this kit, editable so
that its reference solutions stay beside its grader), run_autograder, and a copy of the kit.
run_autograder grades $AUTOGRADER_ROOT/submission (default /autograder) and writes
results/results.json in Gradescope's format: one test per check, with its score. Hidden
checks show their result, their rule and the recognised mistake, never their inputs.
"""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from .. import ROOT
from ..errors import BadInput
from ..model.spec import VISIBILITIES
from ..problems import ORDER

KIT_PARTS = ("pyproject.toml", "README.md", "grader", "solutions")
SETUP = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3-pip python3-venv bubblewrap > /dev/null
python3 -m pip install --quiet torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install --quiet -e /autograder/source/attnkit
"""
RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission.
set -uo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
"${PYTHON:-python3}" -m attnkit.fronts.cli gradescope run --root "$root"
"""


SETTINGS = "gradescope.json"
"""In the autograder's copy of the kit: the settings `build` was given (the default visibility)."""


def build(out, visibility: str | None = None) -> Path:
    """The autograder zip; `visibility`: who sees each check's result (VISIBILITIES), unless its spec says otherwise."""
    out = Path(out)
    if visibility is not None and visibility not in VISIBILITIES:
        raise BadInput(f"--visibility {visibility}: choose one of {', '.join(VISIBILITIES)}")
    if out.suffix.lower() != ".zip":
        raise BadInput(f"{out}: the autograder must be a .zip")
    if out.exists():
        raise BadInput(f"{out} exists: choose a new name (nothing is overwritten)")
    try:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o755 << 16
                z.writestr(info, text)
            if visibility is not None:
                z.writestr(f"attnkit/{SETTINGS}", json.dumps({"visibility": visibility}) + "\n")
            for part in KIT_PARTS:
                path = ROOT / part
                files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
                for f in files:
                    z.write(f, f"attnkit/{f.relative_to(ROOT)}")
    except OSError as exc:
        raise BadInput(f"{out}: cannot write it ({exc.strerror})") from None
    return out


MAX_OUTPUT = 2000  # characters of one test's output (and of the summary): results.json is shown to the student

RAISED = frozenset((  # builtin exception types a not-started line may name: the learner's own class names never show
    "AssertionError", "AttributeError", "FileNotFoundError", "ImportError", "IndentationError", "IndexError",
    "KeyError", "MemoryError", "ModuleNotFoundError", "NameError", "NotImplementedError", "OSError", "RecursionError",
    "RuntimeError", "SyntaxError", "SystemExit", "TabError", "TypeError", "UnicodeDecodeError", "ValueError",
    "ZeroDivisionError",
))


def public_output(check, problem=None) -> str:
    """What a student sees of a check: its rule, its result, the mistake it recognised, all in the grader's own words
    (from the result's fields, never from its message, which quotes the learner's code): no inputs or values.
    `problem`: the check's ProblemResult (its status says whether it was started)."""
    if check.status == "passed":
        return f"{check.title}: passed"
    head = f"{check.title}: {check.status}"
    if problem is not None and problem.status == "not_started":
        return f"{head}\nnot started: {not_started(problem.id, check.message)}"
    if check.status == "error":
        return f"{head}\nthe grader failed on this check, not your code: its points are left out of your maximum"
    if check.mistake and problem is not None:
        return f"{head}\n{_mistake(problem.id, check.mistake)}"
    return head


def _mistake(pid: str, mistake: str) -> str:
    """The catalogue's text for a recognised mistake (the grader's id, the kit's words)."""
    from ..diagnose.diagnose import describe
    from ..problems import get

    try:
        return describe(get(pid), mistake)
    except Exception:  # noqa: BLE001 - an id this kit does not know: its name alone
        return f"recognised mistake: {mistake}"


def not_started(pid: str, message: str) -> str:
    """Why a problem was not started, in one of the grader's own sentences. The reason comes from the worker (the
    learner's process could write any text there), so it only chooses among these sentences: an exception's message,
    its file and line never show (they could carry the hidden inputs the worker held while importing), and its type
    shows only where it is one of the builtin types in RAISED."""
    from ..problems import get

    reason = message.split("\n", 1)[0].removeprefix("not started: ")
    failed = f"importing {pid}.py failed: "
    if reason == f"{pid}.py raises NotImplementedError: still a stub, fill it in":
        return f"{pid}.py is still the stub (it raises NotImplementedError): fill it in"
    if reason == f"{pid}.py not found in the submission":
        return f"{pid}.py is not in your submission"
    if reason == f"{pid}.py defines no `{get(pid).symbol}`":
        return f"{pid}.py defines no `{get(pid).symbol}`"
    if reason.startswith("the grader could not sandbox this submission"):
        return "the grader could not prepare your submission (too large, or too many files?)"
    if reason == failed + "it printed more than the output limit allows (--output-limit)":
        return f"importing {pid}.py printed more than the output limit allows"
    if reason.startswith(failed):
        m = re.match(r"([A-Za-z_]\w*)(?=:|$| \()", reason[len(failed):])
        raised = m.group(1) if m and m.group(1) in RAISED else "an exception"
        return (f"your module {pid}.py raised {raised} on import (its message and line are left out here; run the "
                "public checks to see them)")
    return f"{pid}.py could not be loaded (run the public checks to see why)"


def _public(text: str) -> str:
    """Text for results.json: no control characters (newlines kept), bounded (json.dumps escapes the rest)."""
    from ..run.inbox import clean

    return clean(text, MAX_OUTPUT)


def results(report, visibility: str | None = None) -> dict:
    """Gradescope's results.json: one test per check, each visible as its spec says (field visibility), else as
    `visibility` (also the whole result's), else at once."""
    from ..problems import get

    tests = []
    for p in report.problems:
        own = get(p.id).visibility or {}
        for c in p.checks:
            if c.status == "skipped":
                continue
            tests.append({"name": f"{p.id}: {c.id}", "score": c.score, "max_score": c.max_score,
                          "status": "passed" if c.status == "passed" else "failed",
                          "output": _public(public_output(c, p)), "visibility": own.get(c.id, visibility or "visible")})
    summary = "\n".join(f"{p.id}: {p.status.replace('_', ' ')} ({p.score:g}/{p.max_score:g})" for p in report.problems)
    data = {"score": report.score, "output": _public(summary), "tests": tests, "stdout_visibility": "hidden"}
    if visibility is not None:
        data["visibility"] = visibility
    return data


def settings() -> dict:
    """What `build` wrote into this copy of the kit ({} where it was built without options, or outside one)."""
    try:
        data = json.loads((ROOT / SETTINGS).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("visibility") in VISIBILITIES else {}


def run(root, sandbox: bool | None = True) -> int:
    """Grade root/submission, write root/results/results.json; a broken submission still gets results.
    Students' code: inside bubblewrap, which setup.sh installs (`sandbox=None` only for the kit's tests)."""
    from ..grading import grade
    from ..run.inbox import one_line
    from ..run.submission import open_submission

    root = Path(root)
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        impl, unpacked = open_submission(root / "submission", label="your submission")
    except BadInput as exc:
        files = ", ".join(f"{pid}.py" for pid in ORDER)
        data = {"score": 0, "output": _public(f"{one_line(exc, 600)}. Upload the problem files ({files})."), "tests": [],
                **({"visibility": settings()["visibility"]} if settings() else {})}
    else:
        try:
            data = results(grade(impl, sandbox=sandbox), settings().get("visibility"))
        finally:
            if unpacked:
                unpacked.cleanup()
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(data["output"])
    return 0
