"""Feedback said once: a recognised mistake's block (name, why, fix) appears once per problem, with the failing
checks it explains listed under it, in every place a learner or an interviewer reads feedback; and the pytest
plugin that every pytest in the environment loads stays cheap and counts its items right."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

from conftest import SOLUTIONS, make_impl
from attnkit import ROOT
from attnkit.diagnose.mistakes import wrong_source
from attnkit.grading import grade
from attnkit.integrations.nbgrade import _outputs
from attnkit.problems import get
from attnkit.report.feedback import for_check, groups
from attnkit.report.interview import markdown
from attnkit.report.summary import failures

PID, MID = "luong_attention", "no_scaling"


@pytest.fixture(scope="module")
def submission(tmp_path_factory):
    problem = get(PID)
    mistake = next(m for m in problem.mistakes if m.id == MID)
    return make_impl(tmp_path_factory.mktemp("once") / "impl", {f"{PID}.py": wrong_source(problem, mistake)})


@pytest.fixture(scope="module")
def report(submission):
    return grade(submission, [PID], sandbox=False)


def _why() -> str:
    return next(m for m in get(PID).mistakes if m.id == MID).explain


def test_the_mistake_explains_several_checks(report):
    named = [c.id for c in report.problem(PID).checks if c.mistake == MID]
    assert len(named) >= 2, named  # else this file tests nothing
    assert [(m, [c.id for c in cs]) for m, cs in groups(report.problem(PID))] == [(MID, named)]
    assert all(_why() not in c.message for c in report.problem(PID).checks)  # the block is not in each message


def test_text_feedback_says_the_block_once_with_the_checks_under_it(report):
    text = failures(report)
    assert text.count(_why()) == 1 and text.count(f"Recognised mistake [{MID}]") == 1
    named = [c for c in report.problem(PID).checks if c.mistake == MID]
    assert text.index(_why()) < min(text.index(f"{PID}::{c.id}\n") for c in named)
    for c in named:  # each check's own evidence stays
        assert c.message.splitlines()[0] in text


def test_each_check_apart_points_back_to_the_first(report):
    problem = report.problem(PID)
    named = [c for c in problem.checks if c.mistake == MID]
    texts = [for_check(problem, c) for c in named]
    assert sum(_why() in t for t in texts) == 1 and _why() in texts[0]
    assert all(f"the same as {PID}::{named[0].id}, above" in t for t in texts[1:])
    # a reader who sees only some checks (pytest -k) gets the block under the first one shown
    shown = {c.id for c in named[1:]}
    assert [_why() in for_check(problem, c, shown) for c in named[1:]] == [True] + [False] * (len(named) - 2)


def test_nbgrader_feedback_and_the_interviewers_report_say_it_once(report):
    named = [c.id for c in report.problem(PID).checks if c.mistake == MID]
    outputs = [o for cid in named for o in _outputs(PID, cid, report)]
    assert sum(_why() in "\n".join(o["traceback"]) for o in outputs) == 1
    md = markdown(report, "<submission>", ["grade"])
    assert md.count(_why()) == 1 and f"**{MID}** explains {', '.join(named)}:" in md


def _pytest(*args, env=None):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ATTNKIT_SANDBOX": "off", **(env or {})})


def test_pytest_prints_the_block_once_and_counts_deselected_items(submission):
    for ci in ("", "true"):  # with CI set (Classroom, Gradescope) pytest's short summary prints crash lines whole
        r = _pytest("-q", "--attnkit-impl", str(submission), "-k", PID, env={"CI": ci, "BUILD_NUMBER": ""})
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stdout.count(_why()) == 1 and f"Recognised mistake [{MID}]: the same as {PID}::" in r.stdout
        summary = r.stdout.split("short test summary info")[1].splitlines()[1:-1]
        assert len(summary) >= 2 and all(line.startswith("FAILED") for line in summary), summary
        assert ci == "" or all(f"[{MID}] " in line for line in summary), summary
    nothing = _pytest("--attnkit-impl", str(submission), "-k", "nomatch")
    assert re.search(r"collected (\d+) items / \1 deselected / 0 selected", nothing.stdout), nothing.stdout
    some = _pytest("--attnkit-impl", str(SOLUTIONS), "-k", "masked_softmax and shapes")
    assert "collected" in some.stdout and "deselected / 1 selected" in some.stdout, some.stdout


def test_loading_the_plugin_imports_no_spec_and_no_torch():
    """Every pytest in the environment loads the plugin: loading it must cost nothing worth measuring."""
    code = "import sys, attnkit.fronts.plugin; print(sorted(m for m in sys.modules if m.startswith(('attnkit', 'torch'))))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    leaves = {"attnkit", "attnkit.errors", "attnkit.defaults", "attnkit.fronts", "attnkit.fronts.plugin",
              "attnkit.fronts.options", "attnkit.run", "attnkit.run.limits"}  # the options' checks and defaults
    assert set(ast.literal_eval(r.stdout)) <= leaves, r.stdout  # no spec (attnkit.problems), no sandbox, no torch


def test_a_grading_run_does_not_import_what_only_test_functions_need(tmp_path):
    """Hypothesis's pytest plugin imports all of Hypothesis at the end of every run (half a second); a run that
    collects no test file (the learner's `pytest`) switches it off. Its control, a run with one test, imports it."""
    pytest.importorskip("_hypothesis_pytestplugin")
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")

    def imported(*args):
        r = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                           cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "ATTNKIT_SANDBOX": "off"})
        assert r.returncode == 0, r.stdout + r.stderr
        return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}

    assert "hypothesis.core" in imported(str(tmp_path))
    assert "hypothesis.core" not in imported("--attnkit-impl", str(SOLUTIONS), "--attnkit-problems", "masked_softmax",
                                             "-k", "shapes")


@pytest.fixture(scope="module")
def unexplained(tmp_path_factory):
    """A mistake no catalogue lists (the scale off by 1e-3), failing several checks of one problem."""
    pid = "scaled_dot_product_attention"
    source = (SOLUTIONS / f"{pid}.py").read_text().replace("/ d**0.5", "/ (d**0.5 + 1e-3)")
    impl = make_impl(tmp_path_factory.mktemp("unexplained") / "impl", {f"{pid}.py": source})
    return grade(impl, [pid], sandbox=False)


def test_what_the_results_show_is_said_once_for_the_checks_no_mistake_explains(unexplained):
    from attnkit.report.summary import to_json

    report, unexplained = unexplained, unexplained.problems[0]
    failing = [c for c in unexplained.checks if c.status == "failed"]
    assert len(failing) >= 2 and all(c.mistake is None for c in failing)  # else this tests nothing
    nothing = "No catalogued mistake reproduces these results"
    assert unexplained.unexplained and nothing in unexplained.unexplained[0]
    assert not any(nothing in c.message for c in failing)  # not in each check's own message
    text = failures(report)
    assert text.count(nothing) == 1 and text.count("Failing checks no catalogued mistake explains") == 1
    assert text.index(nothing) < min(text.index(f"::{c.id}\n") for c in failing)
    first, *others = [for_check(unexplained, c) for c in failing]
    assert nothing in first and all(nothing not in o and f"under {unexplained.id}::{failing[0].id}, above" in o
                                    for o in others)
    assert to_json(report)["problems"][0]["unexplained"] == unexplained.unexplained

