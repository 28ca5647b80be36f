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


def public_output(check) -> str:
    """What a student sees of a check: its rule, its result, the mistake it recognised; no inputs or values."""
    if check.status == "passed":
        return f"{check.title}: passed"
    lines = check.message.splitlines()
    head = f"{check.title}: {check.status}"
    if lines and lines[0].startswith("not started"):
        return f"{head}\n{_without_learner_text(lines[0])}"
    start = next((i for i, line in enumerate(lines) if line.startswith("Recognised mistake")), None)
    return head + ("\n" + "\n".join(lines[start:start + 3]) if start is not None else "")


def _without_learner_text(line: str) -> str:
    """A not-started line without the exception's message, which the learner's code wrote (it could carry the
    hidden inputs): the exception's type and where it was raised stay."""
    m = re.match(r"(not started: importing \S+ failed: )([A-Za-z_][\w.]*)", line)
    if not m:
        return line[:300]
    where = re.search(r"\(([\w./-]+\.py:\d+)", line[m.end():])
    return f"{m.group(1)}{m.group(2)}" + (f" at {where.group(1)}" if where else "") + \
        " (the message is left out here; run the public checks to see it)"


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
                          "output": public_output(c), "visibility": own.get(c.id, visibility or "visible")})
    summary = "\n".join(f"{p.id}: {p.status.replace('_', ' ')} ({p.score:g}/{p.max_score:g})" for p in report.problems)
    data = {"score": report.score, "output": summary, "tests": tests, "stdout_visibility": "hidden"}
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
    from ..run.submission import open_submission

    root = Path(root)
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        impl, unpacked = open_submission(root / "submission", label="your submission")
    except BadInput as exc:
        files = ", ".join(f"{pid}.py" for pid in ORDER)
        data = {"score": 0, "output": f"{exc}. Upload the problem files ({files}).", "tests": [],
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
