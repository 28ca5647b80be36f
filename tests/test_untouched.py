"""An untouched stub is graded as not started from its text alone (judge/untouched.py): the same result a run of it
gives, in a fraction of the time; anything more than the stub is run."""
from __future__ import annotations

import dataclasses

import pytest

from conftest import SOLUTIONS, grade_shared, make_impl
from attnkit.integrations.bundle_files import STUB_HEADER
from attnkit.judge.untouched import untouched
from attnkit.model.stubs import render
from attnkit.problems import all_problems, get
from attnkit.results import Status

SAMPLE = ("masked_softmax", "additive_attention", "multihead_attention")
"""A function, a module importing another problem's, a module of several methods: the stub's kinds."""

RUN_ANYWAY = "\n_unused = 0\n"
"""One statement more: the file is no longer the stub's text, so its worker runs it."""


def _as_dicts(report) -> list[dict]:
    return [dataclasses.asdict(p) for p in report.problems]


def _stubs(directory, ids, extra: str = "") -> None:
    make_impl(directory, {f"{pid}.py": render(get(pid)) + extra for pid in ids}, base=None)


@pytest.mark.parametrize("pid", SAMPLE)
def test_the_stub_seen_from_its_text_is_graded_as_its_run(tmp_path, pid):
    ids = tuple(p.id for p in all_problems() if p.id in {pid, *get(pid).requires})
    _stubs(tmp_path / "seen", ids)
    _stubs(tmp_path / "run", ids, RUN_ANYWAY)
    assert all(untouched(tmp_path / "seen", get(i)) for i in ids)
    assert not any(untouched(tmp_path / "run", get(i)) for i in ids)
    seen, run = grade_shared(tmp_path / "seen", [pid]), grade_shared(tmp_path / "run", [pid])
    assert seen.problem(pid).status == Status.NOT_STARTED and seen.problem(pid).max_score > 0
    assert _as_dicts(seen) == _as_dicts(run)
    assert (seen.score, seen.max_score, seen.devices) == (run.score, run.max_score, run.devices)


@pytest.mark.slow
def test_every_stub_seen_from_its_text_is_graded_as_its_run(tmp_path):
    ids = [p.id for p in all_problems()]
    _stubs(tmp_path / "seen", ids)
    _stubs(tmp_path / "run", ids, RUN_ANYWAY)
    seen, run = grade_shared(tmp_path / "seen"), grade_shared(tmp_path / "run")
    assert _as_dicts(seen) == _as_dicts(run) and seen.max_score == run.max_score


def test_the_stub_is_recognised_in_every_language_and_front(tmp_path):
    for problem in all_problems():
        for text in (render(get(problem.id, "zh")), render(problem, STUB_HEADER),
                     "# my notes\n" + render(problem).replace("    ", "\t").replace("\n\n", "\n\n\n")):
            (tmp_path / f"{problem.id}.py").write_text(text)
            assert untouched(tmp_path, problem), text[:200]


def test_a_stub_with_one_statement_more_is_run(tmp_path):
    """A stub whose class is replaced after its definition is the learner's code, not a stub: full marks here."""
    solution = (SOLUTIONS / "luong_attention.py").read_text().replace("class LuongAttention(", "class _Mine(")
    stub = render(get("luong_attention"))
    impl = make_impl(tmp_path, {"luong_attention.py": stub + "\n\n" + solution + "\nLuongAttention = _Mine\n"})
    assert not untouched(impl, get("luong_attention"))
    report = grade_shared(impl, ["luong_attention"])
    assert report.problem("luong_attention").status == Status.PASSED, report.problem("luong_attention").checks


@pytest.mark.parametrize("change", [
    lambda s: s.replace('raise NotImplementedError("', 'raise NotImplementedError("x'),  # another message
    lambda s: s.replace("raise NotImplementedError(", "return None  # (", 1),  # a body written
    lambda s: s + "import os\n",  # a module-level statement
    lambda s: s[: s.rindex("raise")] + "raise NotImplementedError\n",  # the last error without its call
])
def test_any_change_to_a_statement_is_not_the_stub(tmp_path, change):
    problem = get("additive_attention")
    (tmp_path / "additive_attention.py").write_text(change(render(problem)))
    assert not untouched(tmp_path, problem)


def test_what_cannot_be_read_is_not_the_stub(tmp_path):
    problem = get("masked_softmax")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "masked_softmax.py").write_text(render(problem))
    inside = tmp_path / "impl"
    inside.mkdir()
    (inside / "masked_softmax.py").symlink_to(tmp_path / "elsewhere" / "masked_softmax.py")
    assert not untouched(inside, problem)  # a link out of the submission is never read
    (inside / "masked_softmax.py").unlink()
    (inside / "masked_softmax.py").write_bytes(b"\xff\xfe" + render(problem).encode())
    assert not untouched(inside, problem)
    assert not untouched(tmp_path / "missing", problem)
