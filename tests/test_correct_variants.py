"""Differently written correct implementations all get full marks."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_impl
from grader.grading import grade

STYLES = sorted(p for p in (Path(__file__).parent / "impls").iterdir() if p.is_dir())


@pytest.mark.parametrize("style", STYLES, ids=lambda p: p.name)
def test_correct_style_gets_full_marks(tmp_path, style):
    files = {f.name: f.read_text() for f in style.glob("*.py")}
    report = grade(make_impl(tmp_path, files))
    for p in report.problems:
        assert p.status == "passed", [(c.id, c.message) for c in p.checks if c.status not in ("passed", "skipped")]
        assert all(c.mistake is None for c in p.checks)  # never given a mistake
    assert report.score == report.max_score
