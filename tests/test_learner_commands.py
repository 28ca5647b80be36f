"""attnkit list, hint, solution, reset, watch and grade --plots, as a learner runs them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import GRADED, SOLUTIONS, make_impl
from attnkit import ROOT
from attnkit.problems import ORDER, all_problems, get
from attnkit.model.stubs import render

TOTAL = sum(p.max_points - sum(v for k, v in p.points.items() if k.startswith("cuda")) for p in all_problems()
            if p.id in GRADED)
"""The points a CPU-only run can give."""


@pytest.fixture
def env(tmp_path):
    """A learner's workspace: stub exercises and a private state file."""
    impl = make_impl(tmp_path / "exercises", {f"{p.id}.py": render(p) for p in all_problems()}, base=None)
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir()
    e = dict(os.environ, ATTNKIT_STATE=str(state))
    e.pop("FORCE_COLOR", None)

    def attnkit(*args, extra_env=None):
        return subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", *args], cwd=ROOT, capture_output=True, text=True,
                              env={**e, **(extra_env or {})}, timeout=300)

    return impl, state, attnkit


def test_list_shows_status_score_and_progress(env):
    impl, _, attnkit = env
    (impl / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    r = attnkit("list", "--impl", str(impl))
    assert r.returncode == 0
    assert "masked_softmax" in r.stdout and "passed" in r.stdout and "not started" in r.stdout
    assert f"14/{TOTAL} points, 1/{len(GRADED)} problems passed" in r.stdout and "[#" in r.stdout
    # the track, in order, with each problem's prerequisites, and what to do next
    lines = r.stdout.splitlines()
    assert lines.index("1. warm-up: NumPy first, then the masked softmax every module reuses") < \
        [i for i, line in enumerate(lines) if line.strip().startswith("additive_attention")][0]
    assert any(line.strip().startswith("multihead_attention") and
               "after: scaled_dot_product_attention, multihead_additive_attention" in line for line in lines)
    assert "next: numpy_additive_attention" in r.stdout
    assert "\033[" not in r.stdout  # plain text when not on a terminal


def test_colour_on_a_terminal_only(env):
    impl, _, attnkit = env
    assert "\033[" in attnkit("list", "--impl", str(impl), extra_env={"FORCE_COLOR": "1"}).stdout
    assert "\033[" not in attnkit("list", "--impl", str(impl), extra_env={"NO_COLOR": "1"}).stdout


def test_hints_reveal_one_level_at_a_time_and_are_remembered(env):
    _, state, attnkit = env
    problem = get("additive_attention")
    first = attnkit("hint", "additive")  # a unique prefix names the problem
    assert first.returncode == 0 and first.stderr == ""  # a missing state file is simply created: no warning
    assert f"Hint 1/3 for {problem.id}: {problem.hints[0]}" in first.stdout and problem.hints[1] not in first.stdout
    second = attnkit("hint", problem.id)
    assert problem.hints[1] in second.stdout and problem.hints[2] not in second.stdout and second.stderr == ""
    data = json.loads(state.read_text())
    assert data["hints"] == {problem.id: 2} and "Do not edit" in data["_"]
    attnkit("hint", problem.id)
    last = attnkit("hint", problem.id)
    assert "that was the last hint" in last.stdout and json.loads(state.read_text())["hints"][problem.id] == 3


def test_hint_level_shows_that_hint_alone(env):
    _, state, attnkit = env
    problem = get("additive_attention")
    attnkit("hint", problem.id)
    attnkit("hint", problem.id)
    again = attnkit("hint", problem.id, "--level", "1")  # hint 1 again, without hint 2 reprinted
    assert again.returncode == 0 and again.stderr == ""
    assert f"Hint 1/3 for {problem.id}: {problem.hints[0]}" in again.stdout and problem.hints[1] not in again.stdout
    assert json.loads(state.read_text())["hints"][problem.id] == 2  # what was reached stays reached
    ahead = attnkit("hint", problem.id, "--level", "3")
    assert ahead.stdout.startswith(f"Hint 3/3 for {problem.id}: {problem.hints[2]}")
    assert problem.hints[0] not in ahead.stdout and "that was the last hint" in ahead.stdout
    assert json.loads(state.read_text())["hints"][problem.id] == 3
    for bad in ("4", "0", "x"):
        r = attnkit("hint", problem.id, "--level", bad)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(state.read_text())["hints"][problem.id] == 3


def test_corrupt_state_is_recreated_with_a_warning(env):
    _, state, attnkit = env
    state.write_text("{not json")
    r = attnkit("hint", "luong")
    assert r.returncode == 0 and "unreadable" in r.stderr and "Traceback" not in r.stderr
    assert json.loads(state.read_text())["hints"] == {"luong_attention": 1}


@pytest.mark.parametrize("command", ["hint", "solution", "reset"])
def test_unknown_problem_lists_the_valid_ones(env, command):
    r = env[2](command, "head")  # a prefix of none, and ambiguous as a substring
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"attnkit: error: unknown problem 'head'; choose from: {', '.join(ORDER)}"


def test_solution_only_after_passing_or_with_force(env):
    impl, state, attnkit = env
    refused = attnkit("solution", "masked_softmax", "--impl", str(impl))
    assert refused.returncode == 1 and "not started" in refused.stderr and "def masked_softmax" not in refused.stdout
    forced = attnkit("solution", "masked_softmax", "--force", "--impl", str(impl))
    assert forced.returncode == 0 and forced.stdout == (SOLUTIONS / "masked_softmax.py").read_text()
    assert "masked_softmax" in json.loads(state.read_text())["forced_solutions"]
    (impl / "luong_attention.py").write_text((SOLUTIONS / "luong_attention.py").read_text())
    (impl / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    earned = attnkit("solution", "luong", "--impl", str(impl))
    assert earned.returncode == 0 and "class LuongAttention" in earned.stdout
    assert "luong_attention" not in json.loads(state.read_text())["forced_solutions"]


def test_reset_backs_up_and_never_deletes(env):
    impl, state, attnkit = env
    work = "# my attempt\n" + (SOLUTIONS / "masked_softmax.py").read_text()
    (impl / "masked_softmax.py").write_text(work)
    backups = []
    for _ in range(2):
        r = attnkit("reset", "masked_softmax", "--impl", str(impl))
        assert r.returncode == 0
        assert (impl / "masked_softmax.py").read_text() == render(get("masked_softmax"))
        (impl / "masked_softmax.py").write_text(work)
        backups = sorted((state.parent / "backups").iterdir())
    assert len(backups) == 2 and all(b.read_text() == work for b in backups)  # same second: two distinct names
    (impl / "masked_softmax.py").write_text(render(get("masked_softmax")))
    assert "nothing to do" in attnkit("reset", "masked_softmax", "--impl", str(impl)).stdout


def test_watch_regrades_the_saved_problem(env):
    impl, _, _ = env
    (impl / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    os.utime(impl / "masked_softmax.py", ns=(1, 1))
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit.fronts.cli", "watch", "--impl", str(impl), "--max-regrades", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, ATTNKIT_STATE=str(impl.parent / "s.json")),
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("watching"):
            break
    time.sleep(0.2)
    (impl / "luong_attention.py").write_text((SOLUTIONS / "luong_attention.py").read_text())
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "luong_attention" in out and "passed" in out and "18/18" in out
    after = ORDER[ORDER.index("luong_attention") + 1]
    assert f"luong_attention passes. Next: {after}" in out  # the next problem in the track, not a hint
    assert "attnkit hint luong_attention" not in out
    assert f"32/{TOTAL} points, 2/{len(GRADED)} problems passed" in out and "re-graded luong_attention" in out


def test_grade_plots_a_failing_parity_check(env, tmp_path):
    impl, _, attnkit = env
    wrong = (SOLUTIONS / "additive_attention.py").read_text().replace("features = torch.tanh(", "features = 0.5 * torch.tanh(")
    make_impl(impl, {"additive_attention.py": wrong})
    r = attnkit("grade", "--impl", str(impl), "--plots", str(tmp_path / "plots"))
    png = tmp_path / "plots" / "additive_attention__parity_float64.png"
    assert r.returncode == 1 and png.exists() and f"plot: {png}" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "plots").glob("masked_softmax__*"))  # passing problems get no plot


@pytest.mark.parametrize("where,words", [("dir", "is a directory"), ("missing/state.json", "does not exist")])
def test_a_bad_state_path_is_one_line_and_changes_nothing(env, tmp_path, where, words):
    _, _, attnkit = env
    target = tmp_path / where
    if where == "dir":
        target.mkdir()
    r = attnkit("hint", "luong", extra_env={"ATTNKIT_STATE": str(target)})
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "missing").exists()
    if where == "dir":
        assert list(target.iterdir()) == []  # no .tmp left inside or beside it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_two_commands_saving_state_at_once_never_collide(env):
    _, state, attnkit = env
    procs = [subprocess.Popen([sys.executable, "-m", "attnkit.fronts.cli", "hint", pid], cwd=ROOT, env={
        **os.environ, "ATTNKIT_STATE": str(state)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for pid in ("luong", "additive", "masked", "scaled")]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs) and not any("Traceback" in e for e in errors), errors
    assert isinstance(json.loads(state.read_text())["hints"], dict)
    assert [p.name for p in state.parent.iterdir()] == ["state.json"]  # no temporary file left


def test_list_keeps_every_id_apart_from_its_status():
    """The longest id (the kernels stage's backward, 31 characters) still has two spaces before its status."""
    from types import SimpleNamespace

    from attnkit.fronts.tracks import track_table
    from attnkit.problems import all_problems

    problems = all_problems()
    report = SimpleNamespace(problems=[SimpleNamespace(id=p.id, status="failed", score=0, max_score=1)
                                       for p in problems])
    lines = [line for line in track_table(report, problems).splitlines() if line.startswith("   ")]
    assert len(lines) == len(problems) and max(len(p.id) for p in problems) > 30
    for line in lines:
        assert any(line.startswith(f"   {p.id}  ") for p in problems), line
