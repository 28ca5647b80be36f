"""attnkit classroom init DIR: a GitHub Classroom template: the stubs and an autograding workflow.

`init` writes the problems' stubs (exercises/<id>.py, none overwritten) and .github/workflows/classroom.yml, whose
one step per problem runs `attnkit classroom grade <problem>` (classroom_step.py): the problem is graded once, its
table printed, and its checks' points handed to Classroom's reporter, so the step's result is the table's. CUDA
checks are left out (GitHub's runners have no GPU). The workflow installs attnkit from KIT, a pip requirement (a git
URL or a private index) that the instructor controls; students can read their repository's workflow, as with any
Classroom autograding.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import BadInput
from ..judge.checks import CHECKS
from ..model.stubs import render
from ..problems import all_problems

EXERCISES = "exercises"


def step_id(pid: str) -> str:
    """The step's id, which is also its runner's name for the reporter: letters and digits only (its rule)."""
    return pid.replace("_", "")


def cpu_points(problem) -> int:
    """The problem's points on a machine without a GPU: what its Classroom step is worth."""
    return sum(v for c, v in problem.points.items() if not CHECKS[c].needs_cuda)


def workflow(kit: str) -> str:
    steps = [(step_id(p.id), p.id) for p in all_problems()]
    lines = [
        "name: Autograding", "on: [push, workflow_dispatch]", "permissions:", "  checks: write", "  actions: read",
        "  contents: read", "jobs:", "  grade:", "    runs-on: ubuntu-latest", "    timeout-minutes: 30", "    steps:",
        "      - uses: actions/checkout@v4",
        "      - uses: actions/setup-python@v5", "        with:", '          python-version: "3.11"',
        "      - name: Install attnkit (CPU build of torch)",
        "        run: |",
        "          python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
        f"          python -m pip install {json.dumps(kit)}",
    ]
    for sid, pid in steps:  # one grading per problem; its result (every check's points) goes to $GITHUB_OUTPUT
        lines += [f"      - name: {json.dumps(pid)}", f"        id: {sid}", "        timeout-minutes: 10",
                  f"        run: attnkit classroom grade {pid} --impl {EXERCISES}"]
    lines += ["      - name: Report", "        uses: classroom-resources/autograding-grading-reporter@v1", "        env:"]
    lines += [f"          {sid.upper()}_RESULTS: \"${{{{steps.{sid}.outputs.result}}}}\"" for sid, _ in steps]
    lines += ["        with:", f"          runners: {','.join(sid for sid, _ in steps)}", ""]
    return "\n".join(lines)


def init(directory, kit: str) -> list[Path]:
    """Write the workflow (refused where one exists) and every stub not already there; the files written."""
    root = Path(directory)
    path = root / ".github" / "workflows" / "classroom.yml"
    if path.exists():
        raise BadInput(f"{path} exists: nothing is overwritten")
    written = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(workflow(kit))
        written.append(path)
        (root / EXERCISES).mkdir(exist_ok=True)
        for p in all_problems():
            stub = root / EXERCISES / f"{p.id}.py"
            if not stub.exists():  # a file already there is the instructor's (or a learner's): kept
                stub.write_text(render(p))
                written.append(stub)
    except OSError as exc:
        raise BadInput(f"cannot write the template in {directory}: {exc.strerror}") from None
    return written
