"""Learner code the catalogue was not written from: fresh implementations of real-world mistakes, in other
styles than the catalogue's patches (tests/unseen/<problem>__<mistake or none>__<style>.py). Each fails its
problem, is named right (by symptoms or reproduction), or, where no catalogued mistake fits ("none"), is
named nothing and described by what the results show. No check ever ends in a grader error."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_impl
from attnkit.grading import grade

UNSEEN = sorted((Path(__file__).parent / "unseen").glob("*.py"))


@pytest.mark.parametrize("path", UNSEEN, ids=lambda p: p.stem)
def test_unseen_mistake_fails_and_is_named_right(tmp_path, path):
    pid, expected, _ = path.stem.split("__")
    report = grade(make_impl(tmp_path, {f"{pid}.py": path.read_text()}), [pid])
    result = report.problem(pid)
    assert result.status == "failed"
    assert report.grader_errors == 0, [c.message for c in result.checks if c.status == "error"]
    failing = [c for c in result.checks if c.status == "failed"]
    named = {c.mistake for c in failing}
    if expected == "none":
        assert named == {None}, named
        assert all("What the results show:" in c.message for c in failing if c.id not in ("parameters",))
    else:
        assert named == {expected}, {c.id: c.mistake for c in failing}


def test_the_unseen_set_covers_the_named_mistakes():
    stems = [p.stem.split("__") for p in UNSEEN]
    assert len(stems) >= 15
    assert {m for _, m, _ in stems} >= {"fill_zero", "last_chunk_dropped", "dropout_misplaced", "dropout_wrong_p",
                                        "mask_3d_as_batch", "nan_rows", "extra_bias", "general_wrong_side", "no_bias",
                                        "per_chunk_softmax", "concat_no_transpose", "none"}
