"""Learner code the catalogue was not written from (tests/unseen/). Two kinds of file:
- <problem>__<mistake or none>__<style>.py: fresh implementations of catalogued mistakes in other styles than the
  catalogue's patches; each is named right or, where no catalogued mistake fits ("none"), named nothing and
  described by what the results show;
- <problem>__<slug>.py: written from the contract alone by someone who never saw the grader (real-world styles: model
  code, serving code, course solutions); each docstring says the bug and the stage where it departs. A correct one
  ("BUG: none") passes; a wrong one fails and gets a right name or, with no name, the stage found (the phrase
  tests/unseen/expected.json gives in its stage finding or evidence), and never a wrong name.
No check ever ends in a grader error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from together import Together, selected
from attnkit.grading import costly
from attnkit.problems import all_problems, get, unavailable

HERE = Path(__file__).parent / "unseen"
UNSEEN = sorted(HERE.glob("*.py"))
EXPECTED = {k: v for k, v in json.loads((HERE / "expected.json").read_text()).items() if not k.startswith("_")}
CATALOGUE = [p for p in UNSEEN if p.stem.count("__") == 2]
FRESH = [p for p in UNSEEN if p.stem.count("__") == 1]


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """path -> its problem's result, the file graded as its problem's module among the references; the files of
    unrelated problems share grading runs (tests/together.py), the selected tests' next ones first."""
    runs = Together(tmp_path_factory.mktemp)
    for (path,) in selected(request, "path"):
        if not unavailable(get(path.stem.split("__")[0])):
            runs.add(path, path.stem.split("__")[0], path.read_text())

    def result(path):
        pid = path.stem.split("__")[0]
        if unavailable(get(pid)):  # a stage whose extra is not installed (the kernels stage: Triton)
            pytest.skip(f"{pid}: {unavailable(get(pid))}")
        runs.add(path, pid, path.read_text())
        report = runs.report(path)
        assert report.grader_errors == 0, [c.message for c in report.problem(pid).checks if c.status == "error"]
        return report.problem(pid)

    return result


@pytest.mark.parametrize("path", CATALOGUE, ids=lambda p: p.stem)
def test_unseen_mistake_fails_and_is_named_right(graded, path):
    _, expected, _ = path.stem.split("__")
    result = graded(path)
    assert result.status == "failed"
    failing = [c for c in result.checks if c.status == "failed"]
    named = {c.mistake for c in failing}
    if expected == "none":
        assert named == {None}, named
        assert any(line.startswith("What the results show:") for line in result.unexplained)  # once, for the problem
    else:
        assert named == {expected}, {c.id: c.mistake for c in failing}


def _sample(paths):
    """One file per problem (the first; none of the costly problems, whose kernels the interpreter runs), for the
    README's command; the slow suite runs every one."""
    seen, out = set(), []
    for p in sorted(paths, key=lambda p: (p.stem.split("__")[0], p.stem)):
        pid = p.stem.split("__")[0]
        sampled = pid not in seen and not costly(get(pid))
        out.append(p if sampled else pytest.param(p, marks=pytest.mark.slow))
        seen.add(pid)
    return out


@pytest.mark.parametrize("path", _sample(FRESH), ids=lambda p: p.stem)
def test_fresh_code_gets_the_right_verdict_and_a_right_name_or_stage(graded, path):
    result = graded(path)
    if "BUG: none" in path.read_text():
        assert result.status == "passed", {c.id: c.message for c in result.checks if c.status != "passed"}
        return
    assert result.status == "failed"
    expect = EXPECTED[path.stem]
    failing = [c for c in result.checks if c.status == "failed"]
    named = {c.mistake for c in failing} - {None}
    assert named <= set(expect["names"]), f"a wrong name: {named}"
    if not named:
        said = "\n".join([c.message for c in failing] + result.departure + result.unexplained)
        assert expect.get("stage") and expect["stage"] in said, said[-1500:]


def test_the_unseen_sets_cover_the_problems_and_the_llm_track():
    stems = [p.stem.split("__") for p in CATALOGUE]
    assert len(stems) >= 15
    assert {m for _, m, _ in stems} >= {"fill_zero", "last_chunk_dropped", "dropout_misplaced", "dropout_wrong_p",
                                        "mask_3d_as_batch", "nan_rows", "extra_bias", "general_wrong_side", "no_bias",
                                        "per_chunk_softmax", "concat_no_transpose", "none"}
    fresh = [p.stem.split("__")[0] for p in FRESH]
    wrong = [p for p in FRESH if "BUG: none" not in p.read_text()]
    assert len(wrong) >= 60 and set(EXPECTED) == {p.stem for p in wrong}
    llm = {"rope", "grouped_query_attention", "flash_attention", "attention_backward", "causal_self_attention"}
    assert sum(pid in llm for pid in fresh) >= 50  # issue 23's sets: half of theirs from the LLM track
    assert set(fresh) == {p.id for p in all_problems()}
