"""grade-batch on a Dask cluster: a local cluster started here (a scheduler and two worker processes); results written
and resumable exactly as a local batch's; a bad submission is an error row; a worker lost mid-batch costs nothing."""
from __future__ import annotations

import csv
import json
import os
import signal
import tempfile
import threading
import time

import pytest

from conftest import SOLUTIONS, make_impl, needs_bwrap
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import get
from test_hiring_and_scale import attnkit

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow  # a scheduler and worker processes that import torch: `pytest tests -m slow`


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A scheduler and two single-threaded worker processes on this machine, stopped after the test. Their TMPDIR is
    the test's: a worker killed mid-task (below) cannot remove what it was grading, and that stays out of /tmp."""
    (tmp_path / "workers-tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "workers-tmp"))  # inherited by the worker processes at their start
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "workers-tmp"))  # this process's: the scheduler's files
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  scheduler_port=0, silence_logs=40, local_directory=str(tmp_path / "dask"),
                                  env={"TMPDIR": str(tmp_path / "workers-tmp")}) as c:
        yield c


def _class(folder):
    p = get("masked_softmax")
    make_impl(folder / "good", {"masked_softmax.py": (SOLUTIONS / "masked_softmax.py").read_text()})
    make_impl(folder / "wrong", {"masked_softmax.py": wrong_source(p, p.mistakes[0])})
    make_impl(folder / "hang", {"masked_softmax.py": "while True:\n    pass\n"})
    (folder / "broken.zip").write_bytes(b"not a zip")
    return p


@needs_bwrap  # students' code: each worker grades inside bubblewrap
def test_a_batch_on_a_local_cluster(tmp_path, cluster):
    subs, out = tmp_path / "subs", tmp_path / "out"
    p = _class(subs)
    args = ("grade-batch", str(subs), "--out", str(out), "--problems", "masked", "--timeout", "5",
            "--cluster", cluster.scheduler_address)
    r = attnkit(*args)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"good", "wrong", "hang", "broken.zip"}
    assert rows["good"]["total"] == rows["good"]["max_total"] != ""
    wrong = json.loads((out / "wrong.json").read_text())
    assert wrong["score"] < wrong["max_score"] and wrong["sandbox"] == "bubblewrap"
    assert any(c["mistake"] == p.mistakes[0].id for c in wrong["problems"][0]["checks"])
    assert "timed out" in json.dumps(json.loads((out / "hang.json").read_text()))
    assert rows["broken.zip"]["error"]
    again = attnkit(*args)  # resumable: nothing is graded twice
    assert again.returncode == 0 and "4 submissions" in again.stdout and "good:" not in again.stdout


@needs_bwrap
def test_a_lost_worker_costs_nothing(tmp_path, cluster):
    """One worker is killed while the batch runs; the scheduler gives its tasks to the other (and to the worker
    the nanny restarts): every submission still gets its real result."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    for i in range(4):
        make_impl(subs / f"s{i}", {"masked_softmax.py": (SOLUTIONS / "masked_softmax.py").read_text()})
    pids = [w.process.process.pid for w in cluster.workers.values()]

    def kill_one():
        time.sleep(3)  # the tasks are out by then: both workers are grading
        os.kill(pids[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one)
    start = time.monotonic()
    killer.start()
    r = attnkit("grade-batch", str(subs), "--out", str(out), "--problems", "masked", "--cluster",
                cluster.scheduler_address)
    killer.join()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert time.monotonic() - start > 4, "the batch ended before the worker was killed: nothing was tested"
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert len(rows) == 4 and all(row["total"] == row["max_total"] != "" for row in rows.values()), rows


def test_no_scheduler_is_one_line(tmp_path):
    (tmp_path / "subs" / "a").mkdir(parents=True)
    (tmp_path / "subs" / "a" / "masked_softmax.py").write_text("x = 1\n")
    r = attnkit("grade-batch", str(tmp_path / "subs"), "--out", str(tmp_path / "o"), "--cluster", "tcp://127.0.0.1:9")
    assert r.returncode == 2 and "no Dask scheduler answers there" in r.stderr and "Traceback" not in r.stderr
