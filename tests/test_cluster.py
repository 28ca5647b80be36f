"""grade-batch on a Dask cluster: a local cluster started here (a scheduler and worker processes); results written
and resumable exactly as a local batch's; a bad submission is an error row; a worker lost mid-batch costs nothing.
Secured: `attnkit cluster certs` makes the cluster's certificates, a real TLS cluster started with the command lines
it prints grades a batch and refuses a client without them, grade-batch refuses a cluster without them (but for
--insecure-local on loopback), a worker grades inside bubblewrap whatever the task says, and what comes back is
checked before it is written. The tests that start Dask processes are marked slow."""
from __future__ import annotations

import csv
import json
import math
import os
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import SOLUTIONS, make_impl, needs_bwrap
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import get
from test_hiring_and_scale import attnkit

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")

from attnkit.defaults import DEFAULT_SEED  # noqa: E402
from attnkit.errors import BadInput  # noqa: E402
from attnkit.integrations import cluster as cl  # noqa: E402
from attnkit.integrations.cluster_certs import CA, ROLES, commands, files, make  # noqa: E402

slow = pytest.mark.slow  # a scheduler and worker processes that import torch: `pytest tests -m slow`


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


# --- the certificates -------------------------------------------------------------------------------------------

def test_cluster_certs_writes_a_ca_and_each_roles_key_and_never_overwrites(tmp_path):
    from cryptography import x509

    certs = tmp_path.resolve() / "deep" / "certs"
    r = attnkit("cluster", "certs", str(certs), "--host", "grader.example")
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(certs.stat().st_mode) == 0o700
    assert sorted(p.name for p in certs.iterdir()) == sorted(files())
    for name in files():
        mode = stat.S_IMODE((certs / name).stat().st_mode)
        assert mode == (0o600 if name.endswith("-key.pem") else 0o644), (name, oct(mode))
    ca = x509.load_pem_x509_certificate((certs / CA[0]).read_bytes())
    for role, (cert, _) in ROLES.items():
        leaf = x509.load_pem_x509_certificate((certs / cert).read_bytes())
        leaf.verify_directly_issued_by(ca)  # signed by this CA
        assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # the exact command lines, with this folder's files
    for line in (f"dask scheduler --protocol tls --port 8786", "dask worker tls://grader.example:8786",
                 f"--tls-ca-file {certs / 'ca.pem'}", f"--tls-cert {certs / 'worker.pem'}",
                 f"--tls-key {certs / 'scheduler-key.pem'}",
                 f"--cluster tls://grader.example:8786 --cluster-certs {certs}"):
        assert line in r.stdout, line
    before = {name: (certs / name).read_bytes() for name in files()}
    again = attnkit("cluster", "certs", str(certs))
    assert again.returncode == 2 and again.stdout == "" and "Traceback" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and "already exists" in again.stderr
    assert {name: (certs / name).read_bytes() for name in files()} == before
    # one file of a set already there: refused, and nothing else written beside it
    other = tmp_path / "other"
    other.mkdir()
    (other / "worker-key.pem").write_text("mine\n")
    r = attnkit("cluster", "certs", str(other))
    assert r.returncode == 2 and "worker-key.pem already exists" in r.stderr
    assert [p.name for p in other.iterdir()] == ["worker-key.pem"]
    r = attnkit("cluster", "certs", str(other / "worker-key.pem"))
    assert r.returncode == 2 and "not a directory" in r.stderr and "Traceback" not in r.stderr


def test_cluster_certs_modes_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        make(tmp_path / "certs")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "certs").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "certs" / "client-key.pem").stat().st_mode) == 0o600


# --- the flags: certificates required, but for --insecure-local on loopback -------------------------------------

@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make(tmp_path_factory.mktemp("certs") / "certs")


@pytest.mark.parametrize("flags, said", [
    (["--cluster", "tls://10.0.0.7:8786"], "give --cluster-certs DIR"),
    (["--cluster", "tcp://10.0.0.7:8786"], "give --cluster-certs DIR"),
    (["--cluster", "tcp://127.0.0.1:8786"], "give --cluster-certs DIR"),  # loopback, but not said so
    (["--cluster", "tcp://10.0.0.7:8786", "--insecure-local"], "only for a scheduler on this machine"),
    (["--cluster", "tcp://localhost.example.com:8786", "--insecure-local"], "only for a scheduler on this machine"),
    (["--cluster", "tcp://127.0.0.1.example.com:8786", "--insecure-local"], "only for a scheduler on this machine"),
    (["--cluster", "tls://10.0.0.7:8786", "--insecure-local"], "tls:// needs the cluster's certificates"),
    (["--cluster", "ucx://127.0.0.1:8786", "--insecure-local"], "--insecure-local takes tcp://"),
    (["--cluster", "tcp://127.0.0.1:99999", "--insecure-local"], "expected tcp://HOST:PORT"),
    (["--cluster", "tcp://10.0.0.7:8786", "--cluster-certs", "CERTS"], "the address is tls://"),
    (["--cluster", "tls://user@10.0.0.7:8786", "--cluster-certs", "CERTS"], "expected tls://HOST:PORT"),
    (["--cluster", "tls://10.0.0.7:8786", "--cluster-certs", "CERTS/none"], "not a directory"),
    (["--cluster", "tcp://127.0.0.1:8786", "--insecure-local", "--cluster-certs", "CERTS"], "not both"),
    (["--cluster-certs", "CERTS"], "goes with --cluster"),
    (["--insecure-local"], "goes with --cluster"),
])
def test_grade_batch_refuses_a_cluster_without_certificates(tmp_path, certs, flags, said):
    (tmp_path / "subs" / "a").mkdir(parents=True)
    flags = [f.replace("CERTS", str(certs)) for f in flags]
    r = attnkit("grade-batch", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), *flags)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()  # refused before any work


def test_the_certificates_may_come_from_the_environment_but_a_key_others_read_is_refused(tmp_path, certs, monkeypatch):
    monkeypatch.setenv(cl.CERTS_ENV, str(certs))
    address, security = cl.connection("tls://10.0.0.7:8786", None)
    assert address == "tls://10.0.0.7:8786" and security.require_encryption
    assert security.tls_client_cert == str(certs / "client.pem") and security.tls_ca_file == str(certs / "ca.pem")
    with pytest.raises(BadInput, match="the address is tls://"):
        cl.connection("tcp://10.0.0.7:8786", None)
    loose = tmp_path / "loose"
    loose.mkdir()
    for name in files():
        (loose / name).write_bytes((certs / name).read_bytes())
    (loose / "client-key.pem").chmod(0o644)
    with pytest.raises(BadInput, match="client-key.pem is readable by other users"):
        cl.connection("tls://10.0.0.7:8786", str(loose))
    (loose / "client-key.pem").chmod(0o600)
    (loose / "client.pem").write_text("not a certificate\n")
    with pytest.raises(BadInput, match="the certificates do not load"):
        cl.connection("tls://10.0.0.7:8786", str(loose))


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tcp://127.9.8.7:1", "tcp://localhost:8786",
                                     "tcp://[::1]:8786", "127.0.0.1:8786", "tcp://LOCALHOST"])
def test_insecure_local_is_for_loopback_addresses(address):
    connect, security = cl.connection(address, None, insecure_local=True)
    assert connect.startswith("tcp://") and security is None


# --- the worker's side: bubblewrap, whatever the task says --------------------------------------------------------

def test_a_task_is_graded_in_bubblewrap_whatever_it_asks(monkeypatch):
    from attnkit.integrations import one
    from attnkit.run import jail

    seen = []
    monkeypatch.setattr(jail, "unusable", lambda: None)
    monkeypatch.setattr(one, "grade_one", lambda archive, options: seen.append((archive, options)) or {"ok": 1})
    assert cl.grade_bytes("../../etc/x y.zip", b"PK", {"sandbox": False, "seed": 3, "unknown": "x"}) == {"ok": 1}
    (archive, options), = seen
    assert options == {"seed": 3, "sandbox": True}
    assert archive.name == "x_y.zip" and archive.parent.name.startswith("attnkit-task-")
    # bwrap unusable on the worker: an error row, and nothing is graded
    monkeypatch.setattr(jail, "unusable", lambda: "bwrap is not installed")
    row = cl.grade_bytes("a.zip", b"PK", {"sandbox": False})
    assert set(row) == {"error"} and "cannot sandbox" in row["error"] and len(seen) == 1


def test_a_worker_without_bubblewrap_grades_nothing(tmp_path):
    """A real worker process whose bwrap cannot run (not on its PATH): the task answers an error row, and the
    submission's code never runs (it would write a file)."""
    make_impl(tmp_path / "sub", {"masked_softmax.py": f"open({str(tmp_path / 'ran')!r}, 'w').close()\n"})
    data = cl.pack(tmp_path / "sub")
    code = ("import sys, json; from attnkit.integrations.cluster import grade_bytes; "
            "print(json.dumps(grade_bytes('sub', sys.stdin.buffer.read(), {'sandbox': False, "
            "'problem_ids': ['masked_softmax']})))")
    env = {**os.environ, "PATH": str(tmp_path / "no-bin"), "ATTNKIT_SANDBOX": "off", "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads(r.stdout)
    assert set(row) == {"error"} and "bwrap is not installed" in row["error"], row
    assert not (tmp_path / "ran").exists()


# --- what comes back ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report():
    """A real result of one problem, as a worker sends it (graded here without bwrap: the field says bubblewrap)."""
    from attnkit.grading import grade
    from attnkit.report.summary import to_json

    result = to_json(grade(SOLUTIONS, problem_ids=["masked_softmax"], timeout=60, sandbox=False))
    return {**result, "sandbox": "bubblewrap"}


GRADING = {"problem_ids": ["masked_softmax"], "seed": DEFAULT_SEED, "sandbox": True}


def _nested(depth):
    node = []
    for _ in range(depth):
        node = [node]
    return node


def _forgeries(report):
    """(name, what a worker could send): each must become the row MALFORMED."""
    p0 = report["problems"][0]

    class Sub(dict):
        pass

    yield "a string", "29/29"
    yield "nothing", None
    yield "a list", [report]
    yield "a dict subclass", Sub(report)
    yield "an object", object()
    yield "a number as text", {**report, "score": "14"}
    yield "a bool as a number", {**report, "problems": [{**p0, "score": True}]}
    yield "NaN", {**report, "score": math.nan}
    yield "infinity", {**report, "max_score": math.inf}
    yield "a key too many", {**report, "note": "run me"}
    yield "a key too many deep", {**report, "problems": [{**p0, "checks": [{**p0["checks"][0], "html": "<b>"}]}]}
    yield "a key missing", {k: v for k, v in report.items() if k != "problems"}
    yield "an unknown problem", {**report, "problems": [{**p0, "id": "mine"}]}
    yield "not in bubblewrap", {**report, "sandbox": "process"}
    yield "another seed", {**report, "seed": 1}
    yield "other problems", {**report, "problems": []}
    yield "the problem twice", {**report, "problems": [p0, p0], "score": 2 * p0["score"],
                                "max_score": 2 * p0["max_score"]}
    yield "more than full marks", {**report, "score": report["max_score"] + 100,
                                   "problems": [{**p0, "score": p0["max_score"] + 100}]}
    yield "a negative score", {**report, "score": -1, "problems": [{**p0, "score": -1}]}
    yield "a total that is not the sum", {**report, "score": report["score"] - 1}
    yield "a huge string", {**report, "impl": "x" * (5 << 20)}
    yield "a long string", {**report, "impl": "x" * 30000}
    yield "a huge dict", {f"k{i}": i for i in range(400_000)}
    yield "deep nesting", {**report, "impl": _nested(100_000)}
    yield "bytes", {**report, "impl": b"x"}
    yield "an error row with more", {"error": "x", "score": 29}
    yield "an error row of bytes", {"error": b"x"}


def test_a_malformed_result_is_never_written_as_a_grade(report):
    assert cl.checked(report, GRADING) == report  # a real one passes, unchanged
    for name, forged in _forgeries(report):
        row = cl.checked(forged, GRADING)
        assert set(row) == {"error"} and row["error"].startswith(cl.MALFORMED), (name, row)
        assert len(row["error"]) < 300, name
    row = cl.checked({"error": "bad zip \x1b[2J" + "y" * 10000}, GRADING)  # a worker's error row: kept, cleaned
    assert row["error"].startswith("bad zip y") and "\x1b" not in row["error"] and len(row["error"]) < 2100


class _Future:
    def __init__(self, value):
        self.value = value

    def result(self):
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


def _fake_cluster(monkeypatch, tmp_path, answers: dict) -> dict:
    """A folder of one submission per answer, and a fake Dask client whose task for each answers it: {folder name:
    answer name}."""
    subs = tmp_path / "subs"
    names = {}
    for i, name in enumerate(answers):
        (subs / f"s{i:02d}").mkdir(parents=True)
        (subs / f"s{i:02d}" / "masked_softmax.py").write_text("x = 1\n")
        names[f"s{i:02d}"] = name

    class Client:
        def __init__(self, address, timeout, security):
            assert address == "tcp://127.0.0.1:1" and security is None

        def submit(self, fn, name, data, grading, pure):
            assert fn is cl.grade_bytes and grading["sandbox"] is True and not pure
            return _Future(answers[names[name]])

        def close(self):
            pass

    monkeypatch.setattr(distributed, "Client", Client)
    monkeypatch.setattr(distributed, "as_completed", lambda futures: list(futures))
    return names


def _batch(tmp_path):
    from attnkit.integrations.batch import run

    return run(tmp_path / "subs", tmp_path / "out", cluster="tcp://127.0.0.1:1", problem_ids=["masked_softmax"],
               seed=DEFAULT_SEED, timeout=5, limits=None, sandbox=True)


def test_forged_results_from_the_cluster_become_error_rows(tmp_path, report, monkeypatch):
    """grade_all with a cluster answering forgeries (a fake Dask client): each is an error row in its JSON and in
    grades.csv, the batch goes on, and the one real result is written as a grade."""
    answers = dict(_forgeries(report))
    answers["lost task"] = RuntimeError("KilledWorker \x1b[31mred")
    answers["an error row"] = {"error": "could not be graded (SyntaxError: x)"}
    answers["real"] = report
    names = _fake_cluster(monkeypatch, tmp_path, answers)
    rows = _batch(tmp_path)
    assert len(rows) == len(answers)
    csv_rows = {r["submission"]: r for r in csv.DictReader((tmp_path / "out" / "grades.csv").open())}
    for sub, name in names.items():
        written = json.loads((tmp_path / "out" / f"{sub}.json").read_text())
        if name == "real":
            assert written == {**report, "submission": sub} and csv_rows[sub]["total"] != ""
            continue
        assert set(written) == {"error", "submission"} and csv_rows[sub]["total"] == "", (name, written)
        assert csv_rows[sub]["error"] == written["error"]
        if name == "lost task":
            assert written["error"].startswith("could not be graded on the cluster (RuntimeError: KilledWorker")
            assert "\x1b" not in written["error"]
        elif name == "an error row":
            assert written["error"] == answers[name]["error"]
        else:
            assert written["error"].startswith(cl.MALFORMED), (name, written)


def test_without_tls_the_batch_reaches_only_loopback(tmp_path, monkeypatch):
    """Called without the command line's checks (integrations.batch.run), a cluster without TLS settings is still
    only one on this machine."""
    _fake_cluster(monkeypatch, tmp_path, {"a": {"error": "x"}})
    from attnkit.integrations.batch import run

    with pytest.raises(BadInput, match="only for a scheduler on this machine"):
        run(tmp_path / "subs", tmp_path / "out", cluster="tcp://10.0.0.7:8786", sandbox=True)


def test_a_check_that_fails_is_no_grade_either(tmp_path, report, monkeypatch):
    def broken(*args):
        raise RecursionError("deep")

    _fake_cluster(monkeypatch, tmp_path, {"real": report})
    from attnkit.integrations import cluster_results

    monkeypatch.setattr(cluster_results, "_strings", broken)
    _batch(tmp_path)
    assert json.loads((tmp_path / "out" / "s00.json").read_text()) == {"error": cl.MALFORMED, "submission": "s00"}


# --- a real TLS cluster ------------------------------------------------------------------------------------------

def _dask(argv):
    """A printed command line run as `python -m dask ...` (the `dask` script may not be on PATH)."""
    assert argv[0] == "dask"
    return [sys.executable, "-m", "dask", *argv[1:]]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """A scheduler and one worker started with the command lines `attnkit cluster certs` prints, listening on
    127.0.0.1 only; stopped after the module's tests."""
    root = tmp_path_factory.mktemp("tls")
    certs = make(root / "certs")
    (root / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(root / "tmp")}
    procs, logs = [], []

    def start(argv, log):
        logs.append(open(root / log, "wb"))
        procs.append(subprocess.Popen(argv, cwd=root, env=env, stdout=logs[-1], stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True))  # its own group: killpg
        return procs[-1]

    try:
        argv = _dask(commands(certs, host="127.0.0.1", port=8786)["scheduler"])
        argv[argv.index("--port") + 1] = "0"
        argv[argv.index("--dashboard-address") + 1] = "127.0.0.1:0"
        scheduler = start([*argv, "--host", "127.0.0.1", "--scheduler-file", str(root / "scheduler.json")],
                          "scheduler.log")
        deadline = time.monotonic() + 120
        while not (root / "scheduler.json").exists():
            assert scheduler.poll() is None and time.monotonic() < deadline, (root / "scheduler.log").read_text()
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written whole
        address = json.loads((root / "scheduler.json").read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        port = int(address.rsplit(":", 1)[1])
        worker = _dask(commands(certs, host="127.0.0.1", port=port)["worker"])
        start([*worker, "--host", "127.0.0.1", "--local-directory", str(root / "dask")], "worker.log")
        with distributed.Client(address, security=cl.security(certs), timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
            info = client.scheduler_info()["workers"]
        yield {"address": address, "certs": certs, "root": root,
               "servers": [address, *info, *(w["nanny"] for w in info.values() if w.get("nanny"))]}
    finally:
        for p in reversed(procs):  # the worker first (its nanny stops the worker process), then the scheduler
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()


@slow
@needs_bwrap
def test_a_batch_on_a_tls_cluster(tmp_path, tls_cluster):
    """The secured cluster grades a batch; a task asking for no sandbox, sent by hand, is still graded in bwrap
    (the worker's environment even says ATTNKIT_SANDBOX=off: the suite's)."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    p = get("masked_softmax")
    make_impl(subs / "good")
    make_impl(subs / "wrong", {"masked_softmax.py": wrong_source(p, p.mistakes[0])})
    r = attnkit("grade-batch", str(subs), "--out", str(out), "--problems", "masked,scaled", "--timeout", "20",
                "--cluster", tls_cluster["address"], "--cluster-certs", str(tls_cluster["certs"]))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"good", "wrong"}
    assert rows["good"]["total"] == rows["good"]["max_total"] != "" and not rows["good"]["error"]
    wrong = json.loads((out / "wrong.json").read_text())
    assert wrong["score"] < wrong["max_score"] and wrong["sandbox"] == "bubblewrap"
    assert [q["id"] for q in wrong["problems"]] == ["masked_softmax", "scaled_dot_product_attention"]
    assert any(c["mistake"] == p.mistakes[0].id for c in wrong["problems"][0]["checks"])
    with distributed.Client(tls_cluster["address"], security=cl.security(tls_cluster["certs"]), timeout="30s") as c:
        result = c.submit(cl.grade_bytes, "good", cl.pack(subs / "good"),
                          {"problem_ids": ["masked_softmax"], "seed": DEFAULT_SEED, "sandbox": False},
                          pure=False).result(timeout=300)
    assert result["sandbox"] == "bubblewrap" and result["score"] == result["max_score"], result


CONNECT = """
import sys
import distributed
from distributed.security import Security
from attnkit.integrations import cluster as cl
address, how, certs = sys.argv[1:4]
security = {"none": None, "other_ca": Security.temporary(), "ours": cl.security(certs) if certs else None}[how]
try:
    client = distributed.Client(address, timeout="5s", **({"security": security} if security else {}))
except (OSError, TimeoutError, TypeError, ValueError) as exc:
    print("refused", type(exc).__name__)
else:
    client.close()
    print("connected")
"""


def _connects(address: str, how: str, certs: str = "") -> str:
    """A Dask client's attempt, in a process of its own: a failed Client left to the garbage collector can deadlock
    the next one's event loop in the same process (distributed's LoopRunner, seen here)."""
    done = subprocess.run([sys.executable, "-c", CONNECT, address, how, certs], capture_output=True, text=True,
                          timeout=120)
    return done.stdout.strip() or done.stderr.strip()[-500:]


@slow
def test_a_client_without_the_certificates_is_refused(tmp_path, tls_cluster):
    address = tls_cluster["address"]
    other = make(tmp_path / "other")  # attnkit's own certificates, of another cluster
    for target, how, certs in ((address, "none", ""),  # no certificate at all
                               (address.replace("tls://", "tcp://"), "none", ""),  # plain TCP to the TLS port
                               (address, "other_ca", ""),  # a certificate, of another CA
                               (address, "ours", str(other))):  # attnkit's own certificates, of another cluster
        said = _connects(target, how, certs)
        assert said.startswith("refused"), (target, how, said)
    assert _connects(address, "ours", str(tls_cluster["certs"])) == "connected"  # the same attempt, with the right ones
    (tmp_path / "subs" / "a").mkdir(parents=True)
    r = attnkit("grade-batch", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--cluster", address,
                "--cluster-certs", str(other))
    assert r.returncode == 2 and "TLS handshake failed" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # Below Dask: TLS that trusts the cluster's CA but shows no certificate gets no byte of Dask from the
    # scheduler, nor from the worker or its nanny (each would run code for its caller).
    ctx = ssl.create_default_context(cafile=str(tls_cluster["certs"] / "ca.pem"))
    ctx.check_hostname = False
    assert len(tls_cluster["servers"]) == 3, tls_cluster["servers"]
    for server in tls_cluster["servers"]:
        host, port = server.removeprefix("tls://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                with ctx.wrap_socket(raw) as tls:
                    tls.sendall(b"\0" * 64)
                    assert tls.recv(1) == b"", f"{server} answered a client without a certificate"
                    raise ConnectionError("closed")
    log = (tls_cluster["root"] / "scheduler.log").read_text()
    assert "peer did not return a certificate" in log or "certificate required" in log, log[-2000:]


# --- the insecure local mode: tcp:// on loopback, as before ------------------------------------------------------

@slow
@needs_bwrap  # students' code: each worker grades inside bubblewrap
def test_a_batch_on_a_local_cluster(tmp_path, cluster):
    subs, out = tmp_path / "subs", tmp_path / "out"
    p = _class(subs)
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    args = ("grade-batch", str(subs), "--out", str(out), "--problems", "masked", "--timeout", "5",
            "--cluster", cluster.scheduler_address, "--insecure-local")
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


@slow
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
                cluster.scheduler_address, "--insecure-local")
    killer.join()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert time.monotonic() - start > 4, "the batch ended before the worker was killed: nothing was tested"
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert len(rows) == 4 and all(row["total"] == row["max_total"] != "" for row in rows.values()), rows


@slow  # Dask's client waits out its connection timeout (20 s)
def test_no_scheduler_is_one_line(tmp_path):
    (tmp_path / "subs" / "a").mkdir(parents=True)
    (tmp_path / "subs" / "a" / "masked_softmax.py").write_text("x = 1\n")
    r = attnkit("grade-batch", str(tmp_path / "subs"), "--out", str(tmp_path / "o"), "--cluster", "tcp://127.0.0.1:9",
                "--insecure-local")
    assert r.returncode == 2 and "no Dask scheduler answers there" in r.stderr and "Traceback" not in r.stderr
