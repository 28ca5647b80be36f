"""Attacks on the channel back from the worker: everything a worker sends is untrusted data. Each attack
fails its problem alone with a reason, never blocks or crashes the grader, and decides nothing: no process
is killed or spared because of what the worker said."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from conftest import SOLUTIONS, make_impl
from attnkit.grading import grade

FIND_CONN = (
    "import sys\n"
    "from attnkit.run.wire import dumps\n"
    "_f = sys._getframe()\n"
    "while _f is not None and 'conn' not in _f.f_locals:\n    _f = _f.f_back\n"
    "conn = _f.f_locals['conn']\n"
)
PID = "additive_attention"


def _grade(tmp_path, code, timeout=6):
    impl = make_impl(tmp_path / "impl", {f"{PID}.py": FIND_CONN + code})
    start = time.monotonic()
    report = grade(impl, ["masked_softmax", PID], timeout=timeout)
    return report, time.monotonic() - start


@pytest.mark.parametrize("name,code,reason", [
    ("partial frame header, then silence", "import os, time\nos.write(conn.fileno(), b'\\x00\\x00')\ntime.sleep(600)\n",
     "timed out"),
    ("shared references: 2^80 nodes in a few bytes",
     "import pickle\na = []\nfor _ in range(80):\n    a = [a, a]\nconn.send_bytes(pickle.dumps({'hello': {'cuda': a}}))\n",
     "not a result"),
    ("a message of the wrong type", "conn.send_bytes(dumps({'loaded': 5}))\n", "not a result"),
    ("a result for a call never sent", "conn.send_bytes(dumps({'key': 'made/up', 'result': {'ok': True}}))\n",
     "not a result"),
    ("a second hello, each one sent to start the clock again",
     "import time\nfor _ in range(15):\n    conn.send_bytes(dumps({'hello': {'cuda': False}}))\n    time.sleep(1)\n",
     "a second 'hello' message"),
    ("a second loaded", "conn.send_bytes(dumps({'loaded': None}))\n", "a second 'loaded' message"),
    ("a frame announcing 2 GB", "import os, struct\nos.write(conn.fileno(), struct.pack('!i', 2**31 - 1))\n"
                               "import time\ntime.sleep(600)\n", "not a result|timed out"),
])
def test_a_hostile_message_fails_its_problem_and_nothing_else(tmp_path, name, code, reason):
    import re

    report, took = _grade(tmp_path, code)
    result = report.problem(PID)
    assert result.score == 0 and result.status in ("failed", "not_started"), name
    assert took < 60, f"{name}: grading took {took:.0f} s"
    text = "\n".join(c.message for c in result.checks)
    assert re.search(reason, text), text[:1500]
    assert report.problem("masked_softmax").status == "passed"


def test_a_forged_hello_cannot_name_a_process_to_kill_or_spare(tmp_path):
    """The worker names an unrelated process (and no uid) in a second hello: that process lives on, and the
    worker's own background process dies anyway."""
    marker = f"attnkit-victim-{os.getpid()}"
    victim = subprocess.Popen([marker, "300"], executable="sleep", start_new_session=True)  # marker in argv[0]
    mine = f"akv{os.getpid() % 100000}"  # a forked child's own name (/proc/<pid>/comm: a worker starts no program)
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        f"    open('/proc/self/comm', 'w').write({mine!r})\n"
        "    time.sleep(301)\n    os._exit(0)\n"
        f"conn.send_bytes(dumps({{'hello': {{'cuda': False, 'pid': {victim.pid}, 'uid': None}}}}))\n"
        "raise RuntimeError('forged a hello')\n"
    )
    try:
        report, _ = _grade(tmp_path, code)
        assert report.problem(PID).score == 0
        time.sleep(0.2)
        assert victim.poll() is None, "the grader killed a process the worker named"
        if os.geteuid() == 0:  # without root a new session escapes the process group: documented
            assert not _running(mine, "comm"), "the worker's own background process survived"
    finally:
        victim.kill()
        victim.wait()


def _running(marker: str, where: str = "cmdline") -> bool:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if open(f"/proc/{entry.name}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue  # killed, not yet reaped by whoever inherited it (a container's init may not)
                if marker.encode() in open(f"/proc/{entry.name}/{where}", "rb").read():
                    return True
            except OSError:
                continue
    return False


def test_nan_weights_at_valid_keys_fail_the_weight_sums(tmp_path):
    source = (SOLUTIONS / "masked_softmax.py").read_text().replace(
        "return torch.softmax(filled, dim=-1) * keep",
        "w = torch.softmax(filled, dim=-1) * keep\n    return torch.where(keep, torch.full_like(w, float('nan')), w)")
    report = grade(make_impl(tmp_path, {"masked_softmax.py": source}), ["masked_softmax"])
    sums = next(c for c in report.problems[0].checks if c.id == "weight_sums")
    assert sums.status == "failed" and "nan" in sums.message


def test_a_sparse_huge_file_is_refused_unread(tmp_path):
    impl = make_impl(tmp_path / "impl")
    with open(impl / "blob.bin", "wb") as f:
        f.truncate(2 << 30)  # 2 GB, sparse: reading it would take memory and time
    start = time.monotonic()
    report = grade(impl, ["masked_softmax"])
    assert time.monotonic() - start < 60
    text = "\n".join(c.message for c in report.problems[0].checks)
    assert report.problems[0].score == 0 and "larger than" in text, text[:500]


def test_a_worker_that_ends_with_calls_unread_is_still_heard():
    """A worker that refuses a submission says so and exits without reading the batch already sent to it; the
    kernel then reports ECONNRESET on the grader's end, after the frames it did send (the race behind a refusal
    once read as "ended before it started")."""
    import socket
    import struct

    from attnkit.run.inbox import FrameReader

    grader, worker = socket.socketpair()
    grader.sendall(b"a batch of calls the worker never reads")
    worker.sendall(struct.pack("!i", 5) + b"hello" + struct.pack("!i", 3) + b"bye")
    worker.close()
    reader = FrameReader(grader.fileno())
    try:
        assert reader.read() == [b"hello", b"bye"] and reader.eof
    finally:
        reader.close()
        grader.close()


def test_every_dtype_a_worker_names_is_decoded_or_refused_without_crashing_the_grader():
    """A worker chooses the dtype name of each tensor it sends. Building some dtypes straight from bytes crashes the
    process (a segfault for the quantized ones), so every dtype torch has, with bytes and without, goes through the
    grader's decoding in one process that must survive them all."""
    import sys

    code = (
        "import pickle, torch\n"
        "from attnkit.run import wire\n"
        "from attnkit.run.inbox import Malformed, message\n"
        "names = sorted({str(t).removeprefix('torch.') for t in vars(torch).values() if isinstance(t, torch.dtype)})\n"
        "for name in names:\n"
        "    for n in (2, 0):\n"
        "        size = getattr(torch, name).itemsize\n"
        "        out = {wire.TENSOR: name, 'shape': [n], 'data': bytes(n * size)}\n"
        "        try:\n"
        "            message(pickle.dumps({'key': 'k', 'result': {'ok': True, 'outputs': [out]}}))\n"
        "        except Malformed:\n"
        "            pass\n"
        "print('survived', len(names))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("survived"), (r.returncode, r.stderr[-800:])
    assert int(r.stdout.split()[1]) >= 20


def test_a_submission_with_a_helper_package_is_copied_whole(tmp_path):
    source = (SOLUTIONS / "masked_softmax.py").read_text().replace(
        "import torch\n", "import torch\n\nfrom .helpers.fill import fill_value\n", 1).replace(
        "torch.finfo(scores.dtype).min", "fill_value(scores)")
    impl = make_impl(tmp_path, {"masked_softmax.py": source, "helpers/__init__.py": "",
                                "helpers/fill.py": "import torch\n\n\ndef fill_value(s):\n    return torch.finfo(s.dtype).min\n"})
    report = grade(impl, ["masked_softmax"])
    assert report.score == report.max_score, [c.message for c in report.problems[0].checks if c.status == "failed"][:1]


INJECTION = "```\\n# 124/124: hire\\n<img src=http://evil.example/x.png>\\n<script>alert(1)</script>\\n<!--\\n\\x1b[2J\\x1b[1;1HPASS"


def _outside_fences(markdown: str) -> list[str]:
    """The lines a markdown renderer would interpret (CommonMark fences: closed only by as many backticks)."""
    out, fence = [], None
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = len(stripped) - len(stripped.lstrip("`"))
        elif fence is not None and stripped.startswith("`" * fence) and set(stripped) == {"`"}:
            fence = None
        elif fence is None:
            out.append(line)
    return out


def test_learner_text_cannot_inject_into_the_report_or_the_terminal(tmp_path):
    from attnkit.report.interview import markdown

    code = f"raise RuntimeError(\"{INJECTION}\")\n"
    impl = make_impl(tmp_path / "impl", {f"{PID}.py": code})
    report = grade(impl, [PID])
    messages = "\n".join(c.message for c in report.problem(PID).checks)
    assert "124/124" in messages and "\x1b" not in messages  # the text arrives, without escape sequences
    text = markdown(report, str(impl), ["grade"])
    rendered = "\n".join(_outside_fences(text))
    for bad in ("# 124/124", "<img", "<script", "<!--"):
        assert bad not in rendered, bad


def test_patching_the_workers_helpers_cannot_hide_a_side_effect(tmp_path):
    """The learner's module replaces the worker's own comparison with one that always agrees, then changes its
    input in place: the grader compares the inputs itself and fails side_effects."""
    source = (
        "import torch\nimport attnkit.run.harness as h\nh._same = lambda a, b: True\n\n"
        "def masked_softmax(scores, valid_lens=None):\n"
        "    out = torch.softmax(scores, dim=-1) if valid_lens is None else None\n"
        "    if out is None:\n"
        "        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]\n"
        "        keep = torch.arange(scores.shape[-1]) < lens[..., None]\n"
        "        out = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep\n"
        "    with torch.no_grad():\n        scores.mul_(1.0 + 1e-3)\n"
        "    return out\n"
    )
    report = grade(make_impl(tmp_path, {"masked_softmax.py": source}), ["masked_softmax"])
    side = next(c for c in report.problems[0].checks if c.id == "side_effects")
    assert side.status == "failed" and "modified its input `scores` in place" in side.message, side.message


def test_the_import_probe_cannot_be_told_a_forged_result(tmp_path):
    """The NumPy module asks for torch, hides it, and writes made-up result lines wherever it can (stdout, every
    open descriptor, the finder list), then exits cleanly: the request for torch is still on record."""
    pid = "numpy_additive_attention"
    forged = (
        "import json, os, sys\n"
        "try:\n    import torch  # noqa: F401\nexcept ImportError:\n    pass\n"
        "for fd in range(3, 64):\n"
        "    try:\n        os.write(fd, (json.dumps(['0' * 32, 'imported', '']) + '\\n').encode())\n"
        "    except OSError:\n        pass\n"
        "for f in sys.meta_path:\n    getattr(f, 'seen', []).clear()\n"
        "print('attnkit-probe:' + json.dumps({'modules': []}), flush=True)\n"
        "if 'torch' not in sys.modules:  # in the probe only: the worker has torch loaded\n"
        "    os._exit(0)\n"
    )
    source = forged + (SOLUTIONS / f"{pid}.py").read_text()
    report = grade(make_impl(tmp_path, {f"{pid}.py": source}), [pid])
    check = next(c for c in report.problems[0].checks if c.id == "no_torch")
    assert check.status == "failed" and "imports torch" in check.message, check.message


def test_a_deeply_nested_line_does_not_hide_the_torch_request(tmp_path):
    """Before asking for torch, the NumPy module writes a line of 100,000 nested brackets to the probe's own pipe
    (a JSON bomb that makes the decoder raise RecursionError, not ValueError): the lines after it, the request for
    torch among them, are still read."""
    pid = "numpy_additive_attention"
    bomb = (
        "import __main__\n"
        "if hasattr(__main__, 'out'):  # in the probe only\n"
        "    __main__.out.write('[' * 100000 + '\\n')\n"
        "    __main__.out.flush()\n"
        "try:\n    import torch  # noqa: F401\nexcept ImportError:\n    pass\n"
    )
    report = grade(make_impl(tmp_path, {f"{pid}.py": bomb + (SOLUTIONS / f"{pid}.py").read_text()}), [pid])
    check = next(c for c in report.problems[0].checks if c.id == "no_torch")
    assert check.status == "failed" and "imports torch" in check.message, check.message


def test_gradescope_never_shows_hidden_inputs_from_an_import_error(tmp_path):
    """At import the module finds the hidden inputs the worker already holds and raises them as its message:
    the Gradescope output keeps the exception's type and line, never its message."""
    from attnkit.integrations.gradescope import results

    code = (
        "import sys\n_f = sys._getframe()\n"
        "while _f is not None and 'calls' not in _f.f_locals:\n    _f = _f.f_back\n"
        "_args = next(c['args'] for c in _f.f_locals['calls'] if c.get('args'))\n"
        "raise ImportError('SECRET ' + repr(_args[0].tolist()))\n"
    )
    report = grade(make_impl(tmp_path, {f"{PID}.py": code}), [PID])
    assert "SECRET" in "\n".join(c.message for c in report.problem(PID).checks)  # the grader's own view keeps it
    public = results(report)
    text = public["output"] + "\n".join(t["output"] for t in public["tests"])
    assert "SECRET" not in text and "ImportError" in text
