"""The grader never blames the learner for its own failure, and a learner never profits from it: a wrong
shape from the learner is a clear failure on the checks it affects; a failure of the grader before any
learner code ran (a worker that never started) is a grader error, left out of the maximum, with exit
code 3; a check the grader cannot judge once the learner's code has run fails, saying why, and keeps
the maximum (the learner's results may be what broke it: tests/test_dtype_allowlist.py); messages show
the difference with enough digits."""
from __future__ import annotations

import dataclasses

import subprocess
import sys

import torch

from conftest import SOLUTIONS, make_impl
from attnkit.results import Trouble
from attnkit.judge import checks
from attnkit.run import harness
from attnkit.judge.compare import Tol, mismatch
from attnkit.grading import grade
from attnkit.problems import get
from attnkit.run.pool import Pool
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
    assert not any("internal" in line for line in result.unexplained)
    grads = next(c for c in failing if c.id == "gradients")
    assert "returned weights of shape" in grads.message and "expected" in grads.message
    assert "the last two axes (Tq, Tk) are swapped" in "\n".join(result.unexplained)  # said once, for the problem


def test_a_check_that_crashes_after_the_learners_code_ran_fails_and_keeps_the_maximum(monkeypatch):
    """A crash of a check once the learner's code has run cannot be told from one the learner's results caused (an
    odd dtype the grader trips on): leaving it out of the maximum would let a submission raise its own percentage, so
    the check fails, says that the grader could not judge it and why, and asks for a report."""
    def broken(ctx):
        raise ZeroDivisionError("a bug in the grader")

    original = checks.CHECKS["masking"]
    monkeypatch.setitem(checks.CHECKS, "masking", dataclasses.replace(original, judge=broken))
    report = grade(SOLUTIONS, [ADDITIVE])
    result = report.problem(ADDITIVE)
    masking = next(c for c in result.checks if c.id == "masking")
    points = get(ADDITIVE).points["masking"]
    assert masking.status == "failed" and masking.score == 0 and masking.max_score == points
    assert "could not judge" in masking.message and "ZeroDivisionError" in masking.message
    assert "please report it" in masking.message
    assert result.max_score == sum(c.max_score for c in result.checks) == full_maximum(ADDITIVE, report)
    assert result.score == result.max_score - points
    assert report.grader_errors == 0


def never_started(pool, idle=None):
    """Pool.wait_hello, where no worker ever says hello: the grader's own failure, before any learner code ran. A
    hello read early (the plan's feed polls the workers once the pool is up) is taken back, as if it had never come."""
    for w in pool.workers.values():
        w.hello = None
        w._stop("the worker did not start (injected)", Trouble.ERROR)


def full_maximum(pid, report) -> float:
    return sum(pts for cid, pts in get(pid).points.items() if report.devices["cuda"] or not checks.CHECKS[cid].needs_cuda)


def test_a_worker_that_never_started_is_a_grader_error_left_out_of_the_maximum(monkeypatch):
    monkeypatch.setattr(Pool, "wait_hello", never_started)
    report = grade(SOLUTIONS, [ADDITIVE])
    result = report.problem(ADDITIVE)
    errors = [c for c in result.checks if c.status == "error"]
    assert errors and not any(c.status == "failed" for c in result.checks)
    assert all(c.max_score == 0 and "not your code" in c.message and "did not start" in c.message for c in errors)
    assert result.max_score == sum(c.max_score for c in result.checks) < full_maximum(ADDITIVE, report)
    assert report.grader_errors == len(errors)


def test_a_fault_in_the_grader_code_around_a_call_is_not_the_learners(tmp_path):
    """In the worker: an exception in the grader's own steps (preparing inputs, reading outputs) comes back as a
    grader error, not as 'your code raised'."""
    class Faulty:
        GraderFault = harness.GraderFault

        @staticmethod
        def execute(call, target, digests=False):
            with harness._ours("reading the outputs"):
                raise RuntimeError("broken packing")

    result = _run(Faulty, {"key": "k"}, None, str(tmp_path))
    assert result["grader_error"] and not result["ok"] and "broken packing" in result["error"]["text"]


def test_grader_errors_give_exit_code_3(tmp_path):
    """`attnkit grade` ends 3 when the grader failed on a check (here: workers that never start, through a plugin)."""
    plugin = tmp_path / "break_workers.py"
    plugin.write_text(
        "from attnkit.run.pool import Pool\nfrom attnkit.results import Trouble\n"
        "def _never_started(pool, idle=None):\n"
        "    for w in pool.workers.values():\n        w.hello = None\n"
        "        w._stop('the worker did not start (injected)', Trouble.ERROR)\n"
        "Pool.wait_hello = _never_started\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    code = ("import sys, break_workers\nfrom attnkit.fronts.cli import main\n"
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
