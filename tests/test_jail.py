"""The OS sandbox (bubblewrap, grader/run/jail.py) holds against what a submission tries from inside.

Each attack is additive_attention.py doing something at import and reporting what it saw in the
exception it raises; the grade shows that report, so each test asserts what the code could reach.
Where both launchers defend, the test runs with both (`SANDBOXES`).
"""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import SANDBOXES, make_impl, needs_bwrap
from attnkit import ROOT
from attnkit.grading import grade
from attnkit.run.jail import Sandbox, command, python_dirs
from attnkit.run.sandbox import Limits

PROBLEMS = ["masked_softmax", "additive_attention"]


def _attack(tmp_path, code: str, sandbox=True, beside: bool = True):
    """`beside`: the submission's other problem is graded normally (False where the attack hits its own
    processes: one submission's problems share a sandbox)."""
    impl = make_impl(tmp_path / "impl", {"additive_attention.py": code})
    report = grade(impl, PROBLEMS, timeout=20, limits=Limits(memory_mb=2048), sandbox=sandbox)
    attacked = report.problem("additive_attention")
    assert attacked.score == 0
    assert not beside or report.problem("masked_softmax").status == "passed"
    return "\n".join(c.message for c in attacked.checks)


@needs_bwrap
def test_the_kit_and_the_host_are_not_in_view(tmp_path, spare_sandboxes):
    """No path of the kit's checkout (README, solutions, grader, tests, .git: at most a virtual environment
    inside it), nor the host's /root, /home or /etc."""
    paths = [str(ROOT / "README.md"), str(ROOT / "pyproject.toml"), str(ROOT / "exercises"), str(ROOT / "solutions"), str(ROOT / "grader" / "judge" / "checks.py"),
             str(ROOT / "tests"), str(ROOT / ".git"), "/etc/passwd", "/home", "/root/.bashrc", "/var"]
    code = (f"import os\nseen = [p for p in {paths!r} if os.path.exists(p)]\n"
            f"seen += [n for n in (os.listdir({str(ROOT)!r}) if os.path.isdir({str(ROOT)!r}) else [])"
            f" if os.path.join({str(ROOT)!r}, n) not in {list(python_dirs())!r}]\n"
            "raise RuntimeError(f'SEEN={seen} PIDS={sorted(int(p) for p in os.listdir(\"/proc\") if p.isdigit())}')\n")
    text = _attack(tmp_path, code)
    assert "SEEN=[]" in text, text[:1500]
    pids = ast.literal_eval(text.split("PIDS=")[1].split("]")[0] + "]")  # the namespace's own processes: a handful
    assert len(pids) < 20 and max(pids) < 100, pids


@needs_bwrap
def test_no_network(tmp_path, spare_sandboxes):
    """A server listening on the host's loopback cannot be reached: the sandbox has a network of its own."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = ("import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    said = 'CONNECTED'\n"
            "except OSError as exc:\n    said = f'BLOCKED {type(exc).__name__}'\nraise RuntimeError(said)\n")
    try:
        text = _attack(tmp_path, code)
    finally:
        server.close()
    assert "BLOCKED" in text and "CONNECTED" not in text, text[:1500]


@pytest.mark.skipif(os.geteuid() != 0, reason="without root, and without bubblewrap, one's own processes are reachable")
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_other_processes_cannot_be_killed(tmp_path, sandbox, spare_sandboxes):
    """A process of the host (started here, as the grader's user) survives a submission that signals it and
    every process it can see: its sibling workers (the same user in bubblewrap) too, whose problem is graded as
    usual, and its own workers' server (run/syscalls.py: signals to itself only)."""
    victim = subprocess.Popen(["sleep", "300"])
    code = ("import os, signal\nhits = []\n"
            f"for pid in [{victim.pid}] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
            "    if pid != os.getpid():\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
            "            hits.append(pid)\n        except OSError:\n            pass\n"
            "raise RuntimeError(f'KILLED {hits}')\n")
    try:
        text = _attack(tmp_path, code, sandbox)
        assert victim.poll() is None, "the submission killed a process of the host"
    finally:
        victim.kill()
        victim.wait()
    assert "KILLED []" in text, text[:1500]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_workers_cannot_open_a_socket(tmp_path, sandbox, spare_sandboxes):
    """No worker opens a socket of any family: one problem's worker cannot serve another's (its answers computed
    with a banned call, or in its memory) over loopback, a Unix socket in a shared folder, or the host's network."""
    code = ("import socket\nopened = []\n"
            "for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),\n"
            "                     (socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_NETLINK, socket.SOCK_RAW)):\n"
            "    try:\n        socket.socket(family, kind).close()\n        opened.append(int(family))\n"
            "    except OSError:\n        pass\n"
            "raise RuntimeError(f'OPENED {opened}')\n")
    assert "OPENED []" in _attack(tmp_path, code, sandbox)


@pytest.mark.skipif(os.geteuid() != 0, reason="without root, and without bubblewrap, /tmp is shared")
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_tmp_is_private(tmp_path, sandbox, spare_sandboxes):
    """What a submission writes in /tmp, or any folder every user may write (/var/tmp, /dev/shm, /run/lock), is its
    own: nothing appears in the host's."""
    from attnkit.run import sandbox as process_sandbox

    if not sandbox and any(process_sandbox.under(p, "/tmp") for p in process_sandbox._needed()):
        pytest.skip("the interpreter lives under /tmp: the process sandbox must keep /tmp shared (docs/security.md's table)")
    token = secrets.token_hex(6)
    names = [f"{d}/attnkit-escape-{token}" for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
             if os.path.isdir(d) and os.stat(d).st_mode & 0o1777 == 0o1777]  # every folder any user may write here
    code = (f"for name in {names!r}:\n    try:\n        open(name, 'w').write('x')\n"
            "    except OSError:\n        pass  # a folder the sandbox does not have\n"
            "raise RuntimeError('WROTE')\n")
    text = _attack(tmp_path, code, sandbox)
    assert "WROTE" in text, text[:1500]
    assert [n for n in names if os.path.exists(n)] == []


@needs_bwrap
def test_numpy_problem_cannot_hide_a_torch_import(tmp_path, spare_sandboxes):
    """The NumPy problem's import check runs where torch's directory is empty: removing the grader's import
    watcher and importing torch anyway gets nothing usable, and the check fails."""
    from conftest import SOLUTIONS

    source = (SOLUTIONS / "numpy_additive_attention.py").read_text()
    sneaky = ("import sys\nsys.meta_path[:] = [f for f in sys.meta_path if getattr(f, '__name__', '') != 'Watch']\n"
              "import torch.nn.functional\n" + source)
    impl = make_impl(tmp_path / "impl", {"numpy_additive_attention.py": sneaky})
    report = grade(impl, ["numpy_additive_attention"], timeout=20, sandbox=True)
    check = next(c for c in report.problems[0].checks if c.id == "no_torch")
    assert check.status == "failed", check.message


@pytest.mark.skipif(os.geteuid() != 0, reason="without root, and without bubblewrap, torch's folder stays readable")
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("sneaky", [False, True], ids=["plain", "watcher_removed"])
def test_numpy_problem_cannot_use_torch_when_called(tmp_path, sandbox, sneaky, spare_sandboxes):
    """torch imported inside the NumPy function (so not at import): the fresh interpreter calls the function once,
    where torch is absent (its folder empty), and a function its worker gets right but that asks for torch there, or
    fails there once the import watcher is gone, fails no_torch; the solution passes it."""
    from conftest import SOLUTIONS

    body = ("import numpy as np\n\n\ndef additive_attention_step(s_prev, h, W_a, U_a, v_a):\n"
            "    import torch\n"
            "    s, H, W, U, v = (torch.tensor(np.asarray(x)) for x in (s_prev, h, W_a, U_a, v_a))\n"
            "    alpha = torch.softmax(torch.tanh(W @ s + H @ U.T) @ v, dim=0)\n"
            "    return (alpha @ H).numpy(), alpha.numpy()\n")
    if sneaky:
        body = ("import sys\nsys.meta_path[:] = [f for f in sys.meta_path if getattr(f, '__name__', '') != 'Watch']\n"
                + body)
    for source, passes in ((body, False), ((SOLUTIONS / "numpy_additive_attention.py").read_text(), True)):
        impl = make_impl(tmp_path / f"impl{passes}", {"numpy_additive_attention.py": source})
        report = grade(impl, ["numpy_additive_attention"], timeout=20, sandbox=sandbox)
        checks = {c.id: c for c in report.problems[0].checks}
        assert checks["parity_float64"].status == "passed"  # right in its worker, where torch is loaded
        assert checks["no_torch"].status == ("passed" if passes else "failed"), checks["no_torch"].message


@needs_bwrap
def test_everything_the_submission_started_dies_with_the_namespace(tmp_path):
    """Killing the sandbox (no uid to search for, no process group) ends a process that left its session."""
    marker = f"attnkit-jail-marker-{secrets.token_hex(4)}"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    shell = f"setsid sh -c 'sleep 300; :' {marker} & sleep 300"  # $0 of the detached shell is the marker
    box = Sandbox(command(str(scratch)) + ["/bin/sh", "-c", shell])
    try:
        for _ in range(250):
            if _with(marker):
                break
            time.sleep(0.02)
        assert _with(marker), "the sandboxed process did not start"
    finally:
        box.kill()
    for _ in range(250):  # the kernel tears the namespace down asynchronously: give it a moment under load
        if not _with(marker):
            break
        time.sleep(0.02)
    assert _with(marker) == [], "a process outlived its sandbox"


def _with(marker: str) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if marker.encode() in open(f"/proc/{entry.name}/cmdline", "rb").read():
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def _without_bwrap(tmp_path, *args, sandbox="auto"):
    """Run `attnkit ARGS` where no bwrap can be found on PATH (a learner's laptop)."""
    bin_dir = tmp_path / "bin"  # only what the kit's commands run besides bwrap
    bin_dir.mkdir(exist_ok=True)
    for tool in ("sleep", "sh"):
        target = shutil.which(tool)
        if target and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(target)
    env = {**os.environ, "PATH": str(bin_dir), "ATTNKIT_SANDBOX": sandbox}
    code = "import sys; from attnkit.fronts.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)


@pytest.mark.parametrize("args", [["grade", "--untrusted"], ["grade", "--report", "REPORT"],
                                  ["grade-batch", "SUBS", "--out", "OUT"]], ids=["untrusted", "report", "batch"])
def test_untrusted_grading_refuses_without_the_sandbox(tmp_path, args):
    """Someone else's code is never graded without bubblewrap: one line says what to install, exit 2, nothing written."""
    subs = tmp_path / "subs"
    make_impl(subs / "alice")
    args = [str(tmp_path / "report.md") if a == "REPORT" else str(subs) if a == "SUBS" else
            str(tmp_path / "out") if a == "OUT" else a for a in args]
    if args[0] == "grade":
        args += ["--impl", str(subs / "alice"), "--problems", "masked"]
    proc = _without_bwrap(tmp_path, *args)
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bwrap is not installed" in lines[0] and "apt-get install bubblewrap" in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "report.md").exists() and not (tmp_path / "out").exists()


def test_own_code_is_graded_without_the_sandbox_with_a_notice(tmp_path):
    """A learner without bubblewrap still grades their own code; one line says the OS sandbox is not in use."""
    proc = _without_bwrap(tmp_path, "grade", "--impl", str(make_impl(tmp_path / "mine")), "--problems", "masked")
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    notices = [line for line in proc.stderr.splitlines() if "without the OS sandbox" in line]
    assert len(notices) == 1 and "bwrap is not installed" in notices[0], proc.stderr
    assert re.search(r"total\s+14/14", proc.stdout), proc.stdout[-1500:]


@needs_bwrap
def test_interviewer_report_grades_in_the_sandbox_and_says_so(tmp_path):
    """`--report` implies --untrusted: the grading runs in bwrap, and both the report and the JSON record it."""
    impl = make_impl(tmp_path / "candidate")
    code = "import sys; from attnkit.fronts.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, "grade", "--impl", str(impl), "--problems", "masked",
                           "--report", str(tmp_path / "report.md"), "--json", str(tmp_path / "report.json")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "ATTNKIT_SANDBOX": "off"})
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "- Isolation: bubblewrap" in (tmp_path / "report.md").read_text()
    assert __import__("json").loads((tmp_path / "report.json").read_text())["sandbox"] == "bubblewrap"


@pytest.mark.parametrize("message", [b"[" * 4000, b"{\"exit\": true, \"code\": 0}", b"\xff\xfe", b"{\"exit\": 0}"],
                         ids=["json-bomb", "bool-index", "not-utf8", "missing-field"])
def test_a_malformed_exit_report_ends_that_sandbox_without_raising(message):
    """The server inside the sandbox is the submission's to take over: whatever it sends on the control socket
    ends that sandbox (its problems fail), and never raises in the grader (a JSON bomb raises RecursionError)."""
    from attnkit.run.jail_process import Jail

    jail = Jail.__new__(Jail)  # the channel alone: no bwrap is needed to test what the parent makes of it
    jail.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    jail.exits, killed = {}, []
    jail.kill = lambda: killed.append(True)
    try:
        theirs.send(json.dumps({"exit": 1, "code": -9}).encode())
        theirs.send(message)
        jail.poll()
    finally:
        theirs.close()
        jail.control.close()
    assert jail.exits == {1: -9} and killed == [True]


@needs_bwrap
@pytest.mark.parametrize("mode,early", [("auto", True), ("off", False)])
def test_the_sandbox_starts_before_the_problems_are_resolved(monkeypatch, capsys, mode, early):
    """Resolving --problems loads the specs (torch, a second): the spare sandbox is already starting its own torch by
    then, unless the run grades without one; either way nothing is left after the command."""
    from attnkit.fronts import cli, requests
    from attnkit.run import jail_process
    from conftest import SOLUTIONS

    monkeypatch.setenv("ATTNKIT_SANDBOX", mode)
    seen, real = [], requests.problem_list

    def spy(text):
        seen.append(jail_process._spare is not None)
        return real(text)

    monkeypatch.setattr(requests, "problem_list", spy)
    assert cli.main(["grade", "--impl", str(SOLUTIONS), "--problems", "rope"]) == 0
    assert seen == [early] and "total" in capsys.readouterr().out
    assert jail_process._spare is None


@needs_bwrap
def test_a_sandbox_that_grades_says_nothing_of_its_own(monkeypatch):
    """What the sandbox writes to its own stderr is quoted in the grader's error messages ("the sandbox said: ..."):
    a sandbox that starts, grades and ends normally writes nothing there (no stray output of its server)."""
    from attnkit.run import jail_process
    from conftest import SOLUTIONS

    said, real = [], jail_process.Jail.close

    def close(self):
        said.append(self.bwrap_said())
        real(self)

    monkeypatch.setattr(jail_process.Jail, "close", close)
    report = grade(SOLUTIONS, ["masked_softmax"], sandbox=True)
    assert report.score == report.max_score and said and said == [""] * len(said), said


@needs_bwrap
def test_pytest_on_someone_else_s_folder_runs_none_of_its_pytest_files(tmp_path):
    """`pytest --attnkit-untrusted` imports no conftest.py (pytest would run a submission's before any grading, as the
    grader's user, outside every sandbox): not one in a submission folder under the current one, whose problem is
    graded as usual, nor one in the current folder when that is the submission's, which is refused with one line."""
    from conftest import SOLUTIONS

    marker = tmp_path / "conftest-ran"
    evil = f"open({str(marker)!r}, 'w').write('ran')\n"
    (tmp_path / "test_alice").mkdir()
    shutil.copy(SOLUTIONS / "masked_softmax.py", tmp_path / "test_alice" / "masked_softmax.py")
    (tmp_path / "test_alice" / "conftest.py").write_text(evil)
    run = lambda *args, cwd: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--attnkit-untrusted",
         "--attnkit-problems", "masked_softmax", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    below = run("--attnkit-impl", "test_alice", cwd=tmp_path)
    assert not marker.exists(), below.stdout[-2000:]
    assert "14/14" in below.stdout, below.stdout[-2000:]
    here = run("--attnkit-impl", ".", cwd=tmp_path / "test_alice")
    assert not marker.exists()
    assert here.returncode != 0 and "read its configuration from the submission" in here.stdout + here.stderr


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_compiled_module_without_its_source_never_runs(tmp_path, sandbox, spare_sandboxes):
    """A sibling shipped as bytecode alone (`_h.pyc`, which the source reading cannot read): it is left out of the copy
    the workers import, and the reading names it, so the problem that imports it is not graded on code no one read."""
    import py_compile

    from conftest import SOLUTIONS

    hidden = tmp_path / "hidden.py"
    hidden.write_text((SOLUTIONS / "masked_softmax.py").read_text())
    impl = make_impl(tmp_path / "impl", {"masked_softmax.py": "from ._h import masked_softmax  # noqa: F401\n"})
    py_compile.compile(str(hidden), cfile=str(impl / "_h.pyc"), doraise=True)
    report = grade(impl, ["masked_softmax"], timeout=20, sandbox=sandbox)
    result = report.problems[0]
    assert result.score == 0
    assert any(u.file == "_h.pyc" and "compiled module without its source" in u.what for u in result.uses), result.uses


def test_a_worker_without_its_system_call_filter_runs_no_learner_code(monkeypatch):
    """Where libseccomp cannot be loaded, confine() raises (and the worker, which calls it before any learner code,
    says the grader could not sandbox the submission) instead of running unfiltered."""
    from attnkit.run import syscalls

    if not sys.platform.startswith("linux"):
        pytest.skip("the filter is Linux's")
    monkeypatch.setattr(syscalls, "pyseccomp", None)
    monkeypatch.setattr(syscalls, "MISSING", OSError("libseccomp.so.2: cannot open shared object file"), raising=False)
    with pytest.raises(syscalls.Unconfined, match="libseccomp"):
        syscalls.confine()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_module_no_import_statement_can_name_never_runs(tmp_path, sandbox, spare_sandboxes):
    """A sibling whose file name is not an identifier (`my-helper.py`), imported through importlib: the source reading
    cannot follow the name, so the file is left out of the copy the workers import, and the reading names it."""
    from conftest import SOLUTIONS

    source = "import importlib\n\n_helper = importlib.import_module('my-helper')\nmasked_softmax = _helper.masked_softmax\n"
    impl = make_impl(tmp_path / "impl", {"masked_softmax.py": source,
                                         "my-helper.py": (SOLUTIONS / "masked_softmax.py").read_text()})
    report = grade(impl, ["masked_softmax"], timeout=20, sandbox=sandbox)
    result = report.problems[0]
    assert result.score == 0
    assert any(u.file == "my-helper.py" and "not a Python identifier" in u.what for u in result.uses), result.uses


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_workers_cannot_start_a_program(tmp_path, sandbox, spare_sandboxes):
    """A fresh interpreter holds none of the worker's refusals (banned calls, autograd): outside the kernels stage no
    worker starts a program (run/syscalls.py), not even its own Python, though it may still fork."""
    code = ("import os, subprocess, sys\nsaid = []\n"
            "for argv in (['/bin/true'], [sys.executable, '-c', 'pass']):\n"
            "    try:\n        subprocess.run(argv, check=True)\n        said.append('RAN')\n"
            "    except (OSError, subprocess.SubprocessError) as exc:\n        said.append(type(exc).__name__)\n"
            "pid = os.fork()\nif pid == 0:\n    os._exit(7)\n"
            "said.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
            "raise RuntimeError(f'STARTED {said}')\n")
    text = _attack(tmp_path, code, sandbox)
    assert "STARTED ['PermissionError', 'PermissionError', 7]" in text, text[:1500]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_worker_holds_no_descriptor_but_its_streams_and_its_connection(tmp_path, sandbox, spare_sandboxes):
    """Every other descriptor a worker inherited points at /dev/null before the learner's code runs: among them the
    pipe of multiprocessing's resource tracker, a process of the grader's user outside the sandbox, which unlinks the
    shared memory it is told of and prints what it cannot parse on the grader's terminal."""
    import stat

    code = ("import os, stat\nheld = []\n"
            "for fd in sorted(int(n) for n in os.listdir('/proc/self/fd')):\n"
            "    try:\n        mode = os.fstat(fd).st_mode\n    except OSError:\n        continue\n"
            "    if fd > 2 and not stat.S_ISCHR(mode):\n        held.append(stat.S_IFMT(mode))\n"
            "raise RuntimeError(f'HELD {held}')\n")
    text = _attack(tmp_path, code, sandbox)
    assert f"HELD [{stat.S_IFSOCK}]" in text, text[:1500]  # the connection to the grader alone
