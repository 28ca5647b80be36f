"""Gradescope: `attnkit gradescope build OUT.zip` makes an autograder; inside it, `run` grades.

The autograder zip holds setup.sh (installs the CPU build of torch, then this kit, editable so
that its reference solutions stay beside its grader), run_autograder, and a copy of the kit.
run_autograder grades $AUTOGRADER_ROOT/submission (default /autograder) and writes
results/results.json in Gradescope's format: one test per check, with its score. Hidden
checks show their result, their rule and the recognised mistake, never their inputs. It writes
results.json whatever happens (gradescope_run.py): where bubblewrap cannot run, it grades in the
process sandbox and records that for the instructor, or, built with `--sandbox bwrap`, answers
with an autograder error.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

from .. import ROOT
from ..errors import BadInput
from ..model.spec import VISIBILITIES

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
"""In the autograder's copy of the kit: the settings `build` was given (the default visibility, the sandbox)."""


def build(out, visibility: str | None = None, sandbox: str = "auto") -> Path:
    """The autograder zip; `visibility`: who sees each check's result (VISIBILITIES), unless its spec says otherwise;
    `sandbox`: SANDBOXES."""
    out = Path(out)
    if visibility is not None and visibility not in VISIBILITIES:
        raise BadInput(f"--visibility {visibility}: choose one of {', '.join(VISIBILITIES)}")
    if sandbox not in SANDBOXES:
        raise BadInput(f"--sandbox {sandbox}: choose one of {', '.join(SANDBOXES)}")
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
            chosen = {k: v for k, v in (("visibility", visibility), ("sandbox", sandbox)) if v not in (None, "auto")}
            if chosen:
                z.writestr(f"attnkit/{SETTINGS}", json.dumps(chosen) + "\n")
            for part in KIT_PARTS:
                path = ROOT / part
                files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
                for f in files:
                    z.write(f, f"attnkit/{f.relative_to(ROOT)}")
    except OSError as exc:
        raise BadInput(f"{out}: cannot write it ({exc.strerror})") from None
    return out


MAX_OUTPUT = 2000  # characters of one test's output (and of the summary): results.json is shown to the student

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
    """Why a problem was not started, in one of the grader's own sentences (report/not_started.py)."""
    from ..report.not_started import sentence

    return sentence(pid, message)


def bounded(text: str) -> str:
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
                          "output": bounded(public_output(c, p)), "visibility": own.get(c.id, visibility or "visible")})
    summary = "\n".join(f"{p.id}: {p.status.replace('_', ' ')} ({p.score:g}/{p.max_score:g})" for p in report.problems)
    data = {"score": report.score, "output": bounded(summary), "tests": tests, "stdout_visibility": "hidden"}
    if visibility is not None:
        data["visibility"] = visibility
    return data


SANDBOXES = ("auto", "bwrap")
"""`build --sandbox`: auto (bubblewrap where the machine allows it, else the process sandbox, recorded for the
instructor) or bwrap (bubblewrap only: where it cannot run, every submission gets an autograder error)."""


def settings() -> dict:
    """What `build` wrote into this copy of the kit ({} where it was built without options, or outside one); a value
    this kit does not know is left out."""
    try:
        data = json.loads((ROOT / SETTINGS).read_text())
    except (OSError, ValueError):
        return {}
    allowed = {"visibility": VISIBILITIES, "sandbox": SANDBOXES}
    return {k: v for k, v in data.items() if k in allowed and v in allowed[k]} if isinstance(data, dict) else {}
