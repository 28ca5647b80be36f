"""A learner directory with broken code is graded to the end, each problem failing alone."""
from __future__ import annotations

import time

import pytest

from conftest import SOLUTIONS, make_impl, snapshot, grade_shared

FORWARD = "def forward(self, queries, keys, values, valid_lens=None):"


def additive(body_forward: str) -> str:
    """The reference AdditiveAttention with `body_forward` as the first line of forward."""
    source = (SOLUTIONS / "additive_attention.py").read_text()
    return source.replace(FORWARD, f"{FORWARD}\n        {body_forward}")


NEIGHBOURS = ("masked_softmax", "additive_attention", "luong_attention", "scaled_dot_product_attention")
"""What a broken additive_attention.py is graded beside: its prerequisite, a sibling importing the same one, and an
unrelated problem, each of which must pass (a worker's failure stays in its worker whichever the others are; grading
the whole kit for each broken file proves no more and costs twice the time)."""


def graded(tmp_path, files, remove=(), timeout=30.0, problems=NEIGHBOURS):
    impl = make_impl(tmp_path / "impl", files)
    for name in remove:
        (impl / name).unlink()
    before = snapshot(impl)
    start = time.monotonic()
    report = grade_shared(impl, list(problems), timeout=timeout)
    elapsed = time.monotonic() - start
    assert snapshot(impl) == before, "grading wrote into the graded directory"
    others = {p.id: [(c.id, c.message) for c in p.checks if c.status == "failed"] for p in report.problems
              if p.id != "additive_attention" and p.status != "passed"}
    assert not others, others  # each other problem passed, or what failed in it
    return report.problem("additive_attention"), elapsed


def messages(problem):
    return "\n".join(c.message for c in problem.checks)


def test_syntax_error_is_not_started_with_the_line(tmp_path):
    p, _ = graded(tmp_path, {"additive_attention.py": "def broken(:\n"})
    assert p.status == "not_started" and "SyntaxError" in messages(p) and "additive_attention.py:1" in messages(p)


def test_missing_file_is_not_started(tmp_path):
    p, _ = graded(tmp_path, {}, remove=["additive_attention.py"])
    assert p.status == "not_started" and "additive_attention.py not found" in messages(p)


def test_missing_symbol_is_not_started(tmp_path):
    p, _ = graded(tmp_path, {"additive_attention.py": "import torch\n"})
    assert p.status == "not_started" and "defines no `AdditiveAttention`" in messages(p)


def test_import_error_is_not_started(tmp_path):
    p, _ = graded(tmp_path, {"additive_attention.py": "import no_such_module_anywhere\n"})
    assert p.status == "not_started" and "ModuleNotFoundError" in messages(p)


BESIDE = ("additive_attention", "scaled_dot_product_attention", "grouped_query_attention", "cross_attention",
          "alibi_attention")
"""A hanging problem and neighbours with long calls of their own (67 queries by 1031 keys), which must still pass: the
whole kit beside a spinning worker with a 6 s timeout is more work than a slow two-core machine does in 6 s plus the
wait it is credited with (run/handle.py: QUEUED_GRANTS), and the grading's own time is what this test bounds."""


def test_hang_in_forward_times_out_alone(tmp_path):
    p, elapsed = graded(tmp_path, {"additive_attention.py": additive(body_forward="while True: pass")}, timeout=6,
                        problems=list(BESIDE))
    assert p.status == "failed" and p.score < p.max_score
    assert "timed out after 6 s" in messages(p)
    assert elapsed < 20


def test_hang_at_import_times_out(tmp_path):
    p, _ = graded(tmp_path, {"additive_attention.py": "while True:\n    pass\n"}, timeout=6)
    assert p.status == "failed" and "timed out" in messages(p) and "importing" in messages(p)


@pytest.mark.parametrize("how,expected", [
    ("import os; os.abort()", "SIGABRT"),
    ("import ctypes; ctypes.string_at(0)", "SIGSEGV"),
    ("import os; os._exit(3)", "exited with status 3"),
])
def test_crash_in_forward_fails_alone(tmp_path, how, expected):
    p, _ = graded(tmp_path, {"additive_attention.py": additive(body_forward=how)})
    assert p.status == "failed" and p.score < p.max_score
    assert expected in messages(p)


def test_sys_exit_is_reported_as_such(tmp_path):
    p, _ = graded(tmp_path, {"additive_attention.py": additive(body_forward="import sys; sys.exit(4)")})
    assert p.status == "failed" and "SystemExit: 4" in messages(p)


def test_exception_names_the_learners_line(tmp_path):
    p, _ = graded(tmp_path, {"additive_attention.py": additive(body_forward="return 1 / 0")})
    assert p.status == "failed"
    assert "ZeroDivisionError" in messages(p) and "additive_attention.py:" in messages(p) and "return 1 / 0" in messages(p)


@pytest.mark.parametrize("body,expected", [
    ("return queries", "expected a tuple of 2 tensors"),
    ("return (queries.tolist(), queries)", "where a torch.Tensor was expected"),
])
def test_wrong_return_types_are_explained(tmp_path, body, expected):
    p, _ = graded(tmp_path, {"additive_attention.py": additive(body_forward=body)})
    assert p.status == "failed" and expected in messages(p)


def test_learner_prints_do_not_reach_the_grader_output(tmp_path, capfd):
    p, _ = graded(tmp_path, {"additive_attention.py": additive("print('NOISE' * 10)")})
    assert p.status == "passed"
    assert "NOISE" not in capfd.readouterr().out


def test_the_deadline_moves_by_the_wait_for_a_cpu_only_and_within_its_grants(monkeypatch):
    """A worker that waited for a CPU behind the others gets that wait back, up to QUEUED_GRANTS more timeouts; one that waited
    for nothing (a sleep, an endless loop running alone) is stopped at its deadline. The wait is the kernel's count,
    read by the grader from /proc."""
    import subprocess
    import sys

    from attnkit.results import Trouble
    from attnkit.run.handle import QUEUED_GRANTS, Worker

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        w = Worker(None, child, "/dev/null", 4.0)
        w.hello, w.pending = {}, ["k"]
        assert isinstance(w._queued(), float)  # the real count of a real process
        waits = iter([0.0, 3.0, 3.0, 9.0, 100.0])
        monkeypatch.setattr(w, "_queued", lambda: next(waits))
        monkeypatch.setattr(w, "close", lambda: None)
        w.queued, w.deadline = w._queued(), 100.0
        w.check_deadline(101.0)  # waited 3 s: the deadline moves by 3
        assert w.failure is None and w.deadline == 103.0
        w.check_deadline(104.0)  # no more wait since: stopped
        assert w.end is Trouble.TIMEOUT and "timed out after 4 s" in w.failure
        w.failure = w.end = None
        w.check_deadline(104.0)  # 6 s more wait, within the grants left (QUEUED_GRANTS timeouts in all)
        assert w.failure is None and w.deadline == 109.0 and w.granted == 9.0
        w.check_deadline(110.0)  # 91 s more wait: capped at 3 timeouts (12 s) in all
        assert w.failure is None and w.granted == QUEUED_GRANTS * 4.0 and w.deadline == 112.0
    finally:
        child.kill()
        child.wait()


def test_the_deadline_moves_by_the_graders_own_work_once_while_that_call_runs(monkeypatch):
    """A call whose hook does the grader's own work (the on-chip check compiling the kernels: Hook.grace) gets that
    time once, while it is the call running; a call before it gets nothing from it, and the message says both."""
    from attnkit.results import Trouble
    from attnkit.run.handle import Worker
    from attnkit.run.hooks import HOOKS

    compiling = HOOKS["onchip"].grace
    assert compiling >= 60
    w = Worker(None, None, "/dev/null", 4.0)
    monkeypatch.setattr(w, "close", lambda: None)
    monkeypatch.setattr(w, "_queued", lambda: None)
    w.hello, w.got_loaded = {}, True
    w.expect([{"key": "plain", "args": []}, {"key": "onchip", "args": [], "hooks": {"onchip": {"arches": [80]}}}])
    assert w.graces == {"onchip": compiling}
    w.deadline = 100.0
    w.check_deadline(101.0)  # the plain call is running: no grace for it
    assert w.end is Trouble.TIMEOUT and "grader" not in w.failure
    w.failure = w.end = None
    w.pending.remove("plain")  # answered: the compiled call runs
    w.check_deadline(101.0)
    assert w.failure is None and w.deadline == 100.0 + compiling
    w.check_deadline(101.0 + compiling)  # once only
    assert w.end is Trouble.TIMEOUT and f"and {compiling:g} s for the grader's own work" in w.failure
