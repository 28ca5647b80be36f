"""Whole outputs pinned for a fixed seed, as exercism's runner compares whole results.json files: the JSON
report, the score table and the interviewer's report of one submission with a passing problem, a
catalogued mistake and an untouched stub, all in tests/golden/.

Only what depends on the machine is normalised (the submission's path, the date, versions, the
isolation line). After an intended change of output, regenerate them and review the diff:

    ATTNKIT_REGEN_GOLDEN=1 pytest tests/test_golden.py
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import SOLUTIONS, make_impl
from attnkit.defaults import DEFAULT_SEED
from attnkit.diagnose.mistakes import wrong_source
from attnkit.grading import grade
from attnkit.problems import get
from attnkit.report.interview import markdown
from attnkit.report.summary import failures, table, to_json

GOLDEN = Path(__file__).parent / "golden"
PROBLEMS = ["numpy_additive_attention", "masked_softmax", "luong_attention"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    luong = get("luong_attention")
    mistake = next(m for m in luong.mistakes if m.id == "no_scaling")
    impl = make_impl(tmp_path_factory.mktemp("golden") / "submission",
                     {"luong_attention.py": wrong_source(luong, mistake),
                      "numpy_additive_attention.py": (SOLUTIONS.parent / "exercises" / "numpy_additive_attention.py").read_text()})
    report = grade(impl, PROBLEMS, seed=DEFAULT_SEED, sandbox=False)
    path = str(impl)

    def norm(text: str) -> str:
        text = text.replace(path, "<submission>")
        text = re.sub(r'"memory": "(cgroup|worker)"', '"memory": "<cgroup where the grader can make one>"', text)
        text = re.sub(r"^- Graded: .*$", "- Graded: <date> with <versions>", text, flags=re.M)
        return re.sub(r"^- Isolation: .*?; hidden inputs seed", "- Isolation: <isolation>; hidden inputs seed", text,
                      flags=re.M)

    return {
        "report.json": norm(json.dumps(to_json(report), indent=2, sort_keys=True)) + "\n",
        "table.txt": norm(table(report) + "\n\nWhat to fix:\n" + failures(report)) + "\n",
        "interview.md": norm(markdown(report, "<submission>", ["attnkit", "grade", "--report"])),
    }


@pytest.mark.parametrize("name", ["report.json", "table.txt", "interview.md"])
def test_whole_output_matches_golden(outputs, name):
    golden = GOLDEN / name
    if os.environ.get("ATTNKIT_REGEN_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(outputs[name])
    assert golden.exists(), f"no {golden}: regenerate with ATTNKIT_REGEN_GOLDEN=1 pytest tests/test_golden.py"
    assert outputs[name] == golden.read_text(), \
        f"{name} differs from {golden}; if the change is intended: ATTNKIT_REGEN_GOLDEN=1 pytest tests/test_golden.py"
