"""The grader never blames the learner for its own failure: a wrong shape from the learner is a clear
failure on the checks it affects; a failure inside the grader is a grader error, left out of the
maximum, with exit code 3; messages show the difference with enough digits."""
from __future__ import annotations

import subprocess
import sys

import torch

from conftest import SOLUTIONS, make_impl
from attnkit.judge import checks
from attnkit.run import harness
from attnkit.judge.compare import Tol, mismatch
from attnkit.grading import grade
from attnkit.run.worker import _run

ADDITIVE = "additive_attention"


def test_a_wrong_output_shape_is_a_clear_failure_never_an_internal_error(tmp_path):
    source = (SOLUTIONS / f"{ADDITIVE}.py").read_text().replace(
        "return torch.bmm(self.dropout(weights), values), weights",
        "return torch.bmm(self.dropout(weights), values), weights.transpose(1, 2)")
    report = grade(make_impl(tmp_path, {f"{ADDITIVE}.py": source}), [ADDITIVE])
    result = report.problem(ADDITIVE)
    assert report.grader_errors == 0
    failing = [c for c in result.checks if c.status == "failed"]
    assert {c.id for c in failing} >= {"shapes", "weight_sums", "parity_float64", "gradients", "masking", "dropout"}
    assert all("internal" not in c.message and "diagnosis failed" not in c.message for c in failing)
    grads = next(c for c in failing if c.id == "gradients")
    assert "returned weights of shape" in grads.message and "expected" in grads.message
    assert "the last two axes (Tq, Tk) are swapped" in grads.message


def test_a_check_that_crashes_is_a_grader_error_left_out_of_the_maximum(tmp_path, monkeypatch):
    def broken(ctx):
        raise ZeroDivisionError("a bug in the grader")

    original = checks.CHECKS["masking"]
    monkeypatch.setitem(checks.CHECKS, "masking", checks.Check(original.id, original.title, original.groups, broken))
    report = grade(SOLUTIONS, [ADDITIVE])
    result = report.problem(ADDITIVE)
    masking = next(c for c in result.checks if c.id == "masking")
    assert masking.status == "error" and masking.max_score == 0
    assert "not your code" in masking.message and "ZeroDivisionError" in masking.message
    assert result.max_score == sum(c.max_score for c in result.checks) and result.score == result.max_score
    assert report.grader_errors == 1


def test_a_fault_in_the_grader_code_around_a_call_is_not_the_learners(tmp_path):
    """In the worker: an exception in the grader's own steps (preparing inputs, reading outputs) comes back as a
    grader error, not as 'your code raised'."""
    class Faulty:
        GraderFault = harness.GraderFault

        @staticmethod
        def execute(call, target):
            with harness._ours("reading the outputs"):
                raise RuntimeError("broken packing")

    result = _run(Faulty, {"key": "k"}, None, str(tmp_path))
    assert result["grader_error"] and not result["ok"] and "broken packing" in result["error"]["text"]


def test_grader_errors_give_exit_code_3(tmp_path):
    """`attnkit grade` ends 3 when the grader failed on a check (here: an injected bug, through a plugin)."""
    plugin = tmp_path / "break_masking.py"
    plugin.write_text(
        "from attnkit.judge import checks\n"
        "def _broken(ctx):\n    raise ZeroDivisionError('injected')\n"
        "c = checks.CHECKS['masking']\n"
        "checks.CHECKS['masking'] = checks.Check(c.id, c.title, c.groups, _broken)\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    code = ("import sys, break_masking\nfrom attnkit.fronts.cli import main\n"
            f"sys.exit(main(['grade', '--impl', {str(SOLUTIONS)!r}, '--problems', 'additive_attention']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "ERR!" in proc.stdout


def test_messages_show_enough_digits_to_see_the_difference():
    got = torch.tensor([0.123456789012], dtype=torch.float64)
    expected = torch.tensor([0.123456780001], dtype=torch.float64)
    text = mismatch("weights", got, expected, Tol(1e-12, 1e-12))
    shown = text.split("(got ")[1].split(")")[0]
    g, e = shown.split(", expected ")
    assert g != e and float(g) != float(e), text


def test_grading_leaves_the_callers_torch_threads_alone():
    """A learner's Jupyter kernel keeps its threads: importing the grader and grading change nothing."""
    code = ("import torch; torch.set_num_threads(2); import attnkit.grading as g; "
            f"g.grade({str(SOLUTIONS)!r}, ['masked_softmax']); print(torch.get_num_threads())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "2", proc.stdout + proc.stderr
