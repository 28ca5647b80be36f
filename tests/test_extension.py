"""A problem, a mask rule and a check with a worker hook arrive by adding files alone.

tests/extension/attnkit_banded/ is an extension package (grader/extensions.py): a problem whose masking argument
is a sliding window (a mask rule the kit does not have), and a check, `repeatable`, whose calls run through a worker
hook of its own (`twice`: each call made twice in the learner's process). No file of the kit names any of them. A
fresh interpreter with ATTNKIT_EXTENSIONS set grades the stub (not started), the reference (full marks), a
catalogued mistake (named) and a stateful submission (the hook's evidence fails the new check alone).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXTENSION = HERE / "extension"

GRADE = r"""
import json, sys
from pathlib import Path
from attnkit.diagnose.mistakes import wrong_source
from attnkit.grading import grade
from attnkit.model.stubs import render
from attnkit.problems import get
from attnkit import solution_path

problem = get("banded_softmax")
stateful = solution_path("banded_softmax").read_text().replace(
    "    if window is None:", "    global CALLS\n    CALLS = globals().get('CALLS', 0) + 1\n    scores = scores + 1e-3 * CALLS\n"
    "    if window is None:")
sources = {"stub": render(problem), "reference": solution_path("banded_softmax").read_text(),
           "mistake": wrong_source(problem, problem.mistakes[0]), "stateful": stateful}
out = {}
sandbox = sys.argv[2] == "bwrap"
for name, text in sources.items():
    d = Path(sys.argv[1]) / name
    d.mkdir()
    (d / "banded_softmax.py").write_text(text)
    p = grade(d, ["banded_softmax"], sandbox=sandbox).problems[0]
    out[name] = {"status": p.status, "score": p.score, "max": p.max_score,
                 "checks": {c.id: [c.status, c.mistake] for c in p.checks}}
print(json.dumps(out))
"""


def _sandboxes():
    from attnkit.run.jail import unusable

    usable = unusable() is None
    if not usable and os.environ.get("ATTNKIT_REQUIRE_SANDBOX") == "1":
        raise AssertionError(f"bubblewrap is required here: {unusable()}")
    return ["process", "bwrap"] if usable else ["process"]


@pytest.fixture(scope="module", params=_sandboxes())
def graded(request, tmp_path_factory):
    """Every submission graded with the extension, in the process sandbox and (where usable) in bubblewrap, where
    the extension's hook module is bound beside the worker modules."""
    env = {**os.environ, "ATTNKIT_EXTENSIONS": "attnkit_banded",
           "PYTHONPATH": os.pathsep.join([str(EXTENSION), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", GRADE, str(tmp_path_factory.mktemp("ext")), request.param], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_kit_names_nothing_of_the_extension():
    kit = HERE.parent / "grader"
    text = "\n".join(p.read_text() for p in kit.rglob("*.py"))
    for name in ("banded_softmax", "repeatable", "twice", "attnkit_banded", "window_too_wide", "stateful"):
        assert f'"{name}"' not in text and f"'{name}'" not in text


def test_the_stub_is_not_started(graded):
    assert graded["stub"]["status"] == "not_started" and graded["stub"]["score"] == 0


def test_the_reference_gets_full_marks_including_the_new_check(graded):
    ref = graded["reference"]
    assert ref["score"] == ref["max"] == 5
    assert ref["checks"]["repeatable"][0] == "passed"


def test_a_catalogued_mistake_fails_and_is_named(graded):
    checks = graded["mistake"]["checks"]
    failed = {cid: mistake for cid, (status, mistake) in checks.items() if status == "failed"}
    assert failed and "repeatable" not in failed
    assert set(failed.values()) == {"window_too_wide"}


def test_the_new_checks_worker_hook_sees_hidden_state(graded):
    checks = graded["stateful"]["checks"]
    assert checks["repeatable"] == ["failed", None]
