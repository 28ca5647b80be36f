"""attnkit classroom init DIR: a GitHub Classroom autograding workflow, one graded step per check.

Each step runs one check through pytest (`pytest --attnkit-impl exercises -k "<problem> and <check>"`)
and is worth the spec's points, so Classroom's total equals attnkit's (CUDA checks are left
out: GitHub's runners have no GPU). The workflow installs attnkit from KIT, a pip requirement
(a git URL or a private index) that the instructor controls; note that students can read
their repository's workflow, as with any Classroom autograding.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..judge.checks import CHECKS
from ..errors import BadInput
from ..problems import all_problems


def workflow(kit: str) -> str:
    steps = []
    for p in all_problems():
        for cid, points in p.points.items():
            if CHECKS[cid].needs_cuda:
                continue
            sid = f"{p.id}-{cid}".replace("_", "-")
            steps.append((sid, f"{p.id}: {cid}", f'python -m pytest --attnkit-impl exercises -q -k "{p.id} and {cid}"', points))
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
    for sid, name, command, points in steps:
        lines += [f"      - name: {json.dumps(name)}", f"        id: {sid}",
                  "        uses: classroom-resources/autograding-command-grader@v1", "        with:",
                  f"          test-name: {json.dumps(name)}", f"          command: {json.dumps(command)}",
                  "          timeout: 10", f"          max-score: {points}"]
    lines += ["      - name: Report", "        uses: classroom-resources/autograding-grading-reporter@v1", "        env:"]
    lines += [f"          {sid.upper().replace('-', '_')}_RESULTS: \"${{{{steps.{sid}.outputs.result}}}}\"" for sid, *_ in steps]
    lines += ["        with:", f"          runners: {','.join(sid for sid, *_ in steps)}", ""]
    return "\n".join(lines)


def init(directory, kit: str) -> Path:
    path = Path(directory) / ".github" / "workflows" / "classroom.yml"
    if path.exists():
        raise BadInput(f"{path} exists: nothing is overwritten")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(workflow(kit))
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None
    return path
