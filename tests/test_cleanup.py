"""Nothing is left behind: after `attnkit grade`, no attnkit file or directory in /tmp and no process of
the grading, also when /tmp cannot be made private (a path the interpreter needs lies there)."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import SANDBOXES, SOLUTIONS, needs_bwrap
from attnkit.run.jail import CODE_DIR


def _processes_with(marker: str) -> list[str]:
    """The command lines holding `marker` of this process's descendants: with `adopting()`, what a command it ran left
    behind is among them (other tests' processes, in the other pytest-xdist process, are not)."""
    parents, lines = {}, {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
                lines[int(entry.name)] = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError, IndexError):
                continue
    mine, todo = set(), [os.getpid()]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in mine:
                mine.add(pid)
                todo.append(pid)
    return [lines[pid] for pid in sorted(mine) if marker in lines.get(pid, "")]


@contextmanager
def adopting():
    """Meanwhile, a process orphaned below this one is re-parented to it (Linux's PR_SET_CHILD_SUBREAPER), not to
    init: a process a finished command left running stays this process's descendant, where it can be told from the
    processes of tests running beside this one."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


PR_SET_CHILD_SUBREAPER = 36


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_grade_leaves_no_file_and_no_process(tmp_path, sandbox):
    """A directory under /tmp on PYTHONPATH keeps /tmp shared with the workers: their private copies and logs
    land in the real /tmp and must still be removed, and the forkserver, or bubblewrap and everything in its
    namespace, must be gone when the command ends."""
    on_path = Path(tempfile.mkdtemp(prefix="cleanup-path-", dir="/tmp"))
    own_tmp = tmp_path / "tmp"  # TMPDIR of the command: what it leaves is its own, whatever else runs meanwhile
    own_tmp.mkdir()
    marker = f"attnkit-cleanup-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(on_path), os.environ.get("PYTHONPATH", "")]),
           "TMPDIR": str(own_tmp), "ATTNKIT_SANDBOX": "bwrap" if sandbox else "off"}
    code = f"import sys; sys.argv[0] = {marker!r}; from attnkit.fronts.cli import main; sys.exit(main(['grade', '--impl', " \
           f"{str(SOLUTIONS)!r}, '--problems', 'numpy,masked']))"
    try:
        with adopting():
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
            assert sorted(os.listdir(own_tmp)) == []
            assert "without the OS sandbox" not in proc.stderr
            for trace in (str(on_path), str(own_tmp), CODE_DIR):  # the forkserver; bwrap; the sandbox's server, workers
                assert _processes_with(trace) == [], "a process of the grading outlived the command"
    finally:
        os.rmdir(on_path)


def test_importing_the_notebook_helpers_leaves_nothing(tmp_path):
    """Every Jupyter kernel imports attnkit.integrations.notebook: it must not leave a directory behind when the kernel dies."""
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    code = "import os, attnkit.integrations.notebook, attnkit.integrations.nbgrade; os._exit(0)"  # killed like a kernel: no clean-up runs
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(own_tmp)}, timeout=120)
    assert proc.returncode == 0 and sorted(os.listdir(own_tmp)) == []


@needs_bwrap
def test_a_spare_sandbox_ends_with_its_process(tmp_path):
    """nbgrader's attnkit step starts spare sandboxes and never stops them: when its process exits, the spare's
    directory and its bwrap are gone all the same."""
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    code = "from attnkit.run import jail_process; jail_process.warm_up(repeat=True)"
    with adopting():
        proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(own_tmp)}, timeout=120,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert sorted(os.listdir(own_tmp)) == []
        assert _processes_with(str(own_tmp)) == [], "a spare sandbox outlived its process"


def test_closing_never_waits_on_a_worker_that_reads_nothing():
    """The first batches go out from a thread of their own; a worker stopped before it reads its batch (SIGSTOP
    here) must not hold the grader: close() ends the worker, and with it the blocked send, at once."""
    import signal
    import time

    import torch

    from attnkit.run.forkserver import warm_up
    from attnkit.run.pool import Pool

    warm_up()
    pool = Pool(str(SOLUTIONS), {"masked_softmax": ("masked_softmax", "masked_softmax")}, 30.0, None, False)
    worker = pool.workers["masked_softmax"]
    os.kill(worker.proc.pid, signal.SIGSTOP)
    big = [{"key": f"k{i}", "args": [torch.zeros(1 << 16, dtype=torch.float64)]} for i in range(8)]  # 4 MB
    pool.submit_all({"masked_softmax": big})
    time.sleep(0.5)
    assert pool.senders[-1].is_alive(), "more than a socket buffer holds: the send must still be waiting"
    start = time.monotonic()
    pool.close()
    assert time.monotonic() - start < 10
    assert not pool.senders[-1].is_alive() and not worker.proc.is_alive()


def test_a_closed_wake_connection_is_left_out():
    """The grader waits on its workers and on the expected values' helper at once; the helper's connection closes
    when it has sent everything, possibly while the grader is waiting (a race CI once hit: OSError, handle closed)."""
    import multiprocessing

    from attnkit.judge.plan import Plan
    from attnkit.problems import get
    from attnkit.run.forkserver import warm_up
    from attnkit.run.pool import Pool

    warm_up()
    p = get("masked_softmax")
    pool = Pool(str(SOLUTIONS), {p.id: (p.id, p.symbol)}, 30.0, None, False)
    try:
        pool.submit_all({p.id: [c.call for c in Plan.draw([p], 0).cases(p).values()]})
        ours, _theirs = multiprocessing.Pipe()
        ours.close()
        pool.run_until(lambda: False, wake=[ours])
        assert not pool.workers[p.id].busy and pool.workers[p.id].failure is None
    finally:
        pool.close()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_temporary_files_of_the_learner_and_of_torch_are_removed(tmp_path, sandbox):
    """Where /tmp is shared with the workers (an interpreter under /tmp, as in CI's clone), what the learner's code or
    torch writes to the temporary directory (torch inductor's cache directory) goes to the worker's private copy
    and is removed with it."""
    from conftest import make_impl

    on_path = Path(tempfile.mkdtemp(prefix="cleanup-path-", dir="/tmp"))
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    marker = f"learner-{os.getpid()}-{sandbox}-"
    code = (SOLUTIONS / "masked_softmax.py").read_text() + (
        f"\nimport tempfile as _t\n_t.mkstemp(prefix={marker!r})\n"
        "from torch._inductor.runtime.cache_dir_utils import cache_dir as _c\n_c()\n")
    before = set(os.listdir("/tmp"))
    impl = tmp_path / "impl"
    make_impl(impl, {"masked_softmax.py": code})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(on_path), os.environ.get("PYTHONPATH", "")]),
           "TMPDIR": str(own_tmp), "ATTNKIT_SANDBOX": "bwrap" if sandbox else "off"}
    try:
        proc = subprocess.run([sys.executable, "-m", "attnkit.fronts.cli", "grade", "--impl", str(impl), "--problems",
                               "masked"], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert sorted(os.listdir(own_tmp)) == []
        new = sorted(n for n in set(os.listdir("/tmp")) - before if n.startswith((marker, "torchinductor_")))
        assert new == [], f"left in /tmp: {new}"
    finally:
        os.rmdir(on_path)


def test_a_failed_plan_closes_the_pool_that_started_meanwhile(tmp_path, monkeypatch):
    """The workers start while the calls are planned, each on its calls as soon as they are drawn: a planning that
    fails (a grader bug, injected here) must not leave them running in a process that lives on (the pytest plugin, watch, a batch), nor their memory cgroups."""
    import attnkit.grading as grading
    from attnkit.run import cgroup

    started = []

    class Recorded(grading.Pool):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    def broken(problems, seed, drawn):
        import time

        time.sleep(1.0)  # the workers are up by now
        drawn("masked_softmax", [])  # one problem drawn and fed to its worker, which loads the module: then the bug
        raise RuntimeError("a planning bug")

    monkeypatch.setattr(grading, "Pool", Recorded)
    monkeypatch.setattr(grading.Plan, "draw", staticmethod(broken))
    with pytest.raises(RuntimeError, match="a planning bug"):
        grading.grade(SOLUTIONS, ["masked_softmax"], sandbox=False)
    assert started, "the pool did not start"
    assert not [w for pool in started for w in pool.workers.values() if w.proc is not None and w.proc.is_alive()]
    layout = cgroup._layout() if cgroup.reason() is None else None
    if layout is not None:
        assert all(not os.path.isdir(f"{layout.root}/{d}") for d in os.listdir(layout.root))


def test_a_later_batch_waits_for_the_memory_window_and_both_are_answered():
    """A second batch (the CUDA checks', once a worker says it sees a GPU) submitted while a measured window is still
    due is sent once the window is closed: on a GPU machine, CUDA's runtime would otherwise count as the learner's
    memory. The window still closes with that batch pending, and the batch is answered after it."""
    import copy

    from attnkit.judge.plan import Plan
    from attnkit.problems import get
    from attnkit.run.forkserver import warm_up
    from attnkit.run.pool import Pool

    warm_up()
    p = get("grouped_query_attention")
    cases = Plan.draw([p], 0).cases(p)
    calls = [c.call for c in cases.values() if c.builder not in ("capabilities", "imports")]
    windowed = [c["key"] for c in calls if c.get("window")]
    assert windowed, "the problem's memory calls are measured in a window of their own"
    late = copy.deepcopy(next(c for c in calls if c["key"].startswith("base/")))
    late["key"] = "late/base"
    pool = Pool(str(SOLUTIONS), {p.id: (p.id, p.symbol)}, 20.0, None, False)
    try:
        pool.submit_all({p.id: calls})
        pool.wait_hello()
        worker = pool.workers[p.id]
        pool.submit_more({p.id: [late]})
        assert worker.later, "the later batch waits while the window is due"
        pool.run_until(lambda: not worker.busy)
        assert worker.failure is None, worker.failure
        assert set(windowed) | {"late/base"} <= set(worker.results)
        assert worker.results["late/base"]["ok"]
        order = list(worker.results)
        assert order.index("late/base") > max(order.index(k) for k in windowed)
    finally:
        pool.close()
