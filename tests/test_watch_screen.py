"""attnkit watch on a terminal, as a learner sees it: driven in a pseudo-terminal, its screen read back.

One watch process over a copy of the stubs: the first screen (cleared, the table at the top, the problem being
edited below it: a stub says so), a save with a syntax error (shown as one, not as "not started"), a save that
passes (the next problem named), then Ctrl-C: nothing it started is left running.
"""
from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from conftest import GRADED, SOLUTIONS, make_impl
from attnkit import ROOT
from attnkit.model.stubs import render
from attnkit.problems import ORDER, all_problems

CLEAR = "\033[2J\033[H"
ANSI = re.compile(r"\033\[[0-9;?]*[A-Za-z]")


AS_A_SHELL = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
              "signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])")
"""Start the command as a terminal's shell would: Ctrl-C neither ignored nor blocked, whatever the test process's own
signal state (a process inherits both, and Python leaves an ignored SIGINT ignored: seen once under pytest-xdist,
where the command never got its Ctrl-C)."""


class Terminal:
    """A process on the slave side of a pty (40 rows, 120 columns); what it wrote, read from the master."""

    def __init__(self, argv, env):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen([sys.executable, "-c", AS_A_SHELL, *argv], cwd=ROOT, env=env, stdin=slave,
                                     stdout=slave, stderr=slave, start_new_session=True, close_fds=True)
        os.close(slave)
        self.text = ""

    def until(self, needle: str, count: int = 1, timeout: float = 240) -> None:
        end = time.monotonic() + timeout
        while self.text.count(needle) < count:
            left = end - time.monotonic()
            assert left > 0 and self.proc.poll() is None, f"no {needle!r} on the screen:\n{self.text[-3000:]}"
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            if ready:
                try:
                    self.text += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # EIO: the process closed the terminal
                    break

    def wait(self, timeout: float) -> int:
        """The process's exit status, reading what it writes meanwhile (as a terminal does: a terminal that stops
        reading blocks a writer once its buffer of a few kilobytes is full)."""
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.text += os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    pass
        if self.proc.poll() is None:  # still running: its signal state, and its threads' stacks (PYTHONFAULTHANDLER)
            try:
                self.text += "".join(ln for ln in open(f"/proc/{self.proc.pid}/status") if ln.startswith(("Sig", "ShdPnd")))
            except OSError:
                pass
            self.proc.send_signal(signal.SIGABRT)
            time.sleep(2)
            try:
                while select.select([self.master], [], [], 0.5)[0]:
                    self.text += os.read(self.master, 65536).decode(errors="replace")
            except OSError:
                pass
            raise AssertionError(f"still running after {timeout} s; its stacks:\n{self.text[-6000:]}")
        return self.proc.wait(timeout=1)

    def screen(self) -> list[str]:
        """The last screen drawn: what follows the last clear, without colours."""
        assert CLEAR in self.text, "the screen was never cleared"
        return ANSI.sub("", self.text.rsplit(CLEAR, 1)[1]).replace("\r", "").splitlines()


def _descendants(pid: int) -> dict[int, str]:
    """{pid: its start time} of every process below `pid` (from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = (int(fields[1]), fields[19])
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, (ppid, start) in parents.items():
            if ppid == p and child not in out:
                out[child] = start
                todo.append(child)
    return out


def _alive(pid: int, start: str) -> bool:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == start and fields[0] != "Z"


@pytest.fixture
def watch(tmp_path):
    impl = make_impl(tmp_path / "exercises", {f"{p.id}.py": render(p) for p in all_problems()}, base=None)
    (impl / "masked_softmax.py").write_text((SOLUTIONS / "masked_softmax.py").read_text())
    # the pty's size is the terminal's (pytest-xdist's processes carry LINES=24 and COLUMNS=80, which would win)
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "LINES", "COLUMNS")}
    env.update(TERM="xterm", ATTNKIT_STATE=str(tmp_path / "state.json"), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    term = Terminal([sys.executable, "-m", "attnkit.fronts.cli", "watch", "--impl", str(impl)], env)
    try:
        yield impl, term
    finally:
        if term.proc.poll() is None:
            os.killpg(term.proc.pid, signal.SIGKILL)
            term.proc.wait(timeout=30)
        os.close(term.master)


def _table_on_top(lines: list[str]) -> None:
    assert lines[0].startswith("attnkit: ") and set(lines[1]) == {"─"}, lines[:3]
    rows = [line.split()[0] for line in lines[2:2 + len(GRADED)]]
    assert rows == list(GRADED), lines[:len(GRADED) + 3]  # one line per problem, in track order, checks not listed


def test_watch_redraws_one_screen_and_tells_a_syntax_error_from_a_stub(watch):
    impl, term = watch
    term.until("watching ")
    first = term.screen()
    _table_on_top(first)
    assert "numpy_additive_attention: not started: still the stub, fill it in" in first
    assert first[-1].startswith("watching ")

    luong = impl / "luong_attention.py"
    luong.write_text("import torch\n\nclass LuongAttention(torch.nn.Module:\n    pass\n")
    term.until("re-graded luong_attention")
    broken = term.screen()
    _table_on_top(broken)
    assert "luong_attention: syntax error (not graded until it compiles)" in broken
    assert any(line.startswith("syntax error in luong_attention.py, line 3: ") for line in broken), broken
    assert not any(line.startswith("luong_attention: not started") for line in broken)
    assert any(re.match(r"luong_attention +syntax error +0/18$", line) for line in broken)  # its row says so too

    luong.write_text((SOLUTIONS / "luong_attention.py").read_text())
    term.until("re-graded luong_attention", count=2)
    passed = term.screen()
    _table_on_top(passed)
    assert "luong_attention: passed (18/18 points)" in passed
    after = ORDER[ORDER.index("luong_attention") + 1]  # the next problem in the track
    assert any(line.startswith(f"luong_attention passes. Next: {after}") for line in passed), "\n".join(passed)
    assert not any("attnkit hint luong_attention" in line for line in passed)  # no hint for a solved problem
    assert sum(bool(re.match(r"luong_attention +passed +18/18$", line)) for line in passed) == 1  # its row, once

    started = _descendants(term.proc.pid)
    assert started, "watch started no worker server"
    os.killpg(term.proc.pid, signal.SIGINT)  # Ctrl-C
    assert term.wait(timeout=60) == 130
    time.sleep(0.5)
    assert [pid for pid, start in started.items() if _alive(pid, start)] == []


def test_a_save_seen_half_written_is_graded_as_written(tmp_path):
    """A save truncates the file, then fills it: a poll between the two sees an empty file. Watch grades the files
    once two polls agree, so the grade and the screen's label (read later) see the same text."""
    from attnkit.fronts.watch import _files, _settled

    saved = tmp_path / "luong_attention.py"
    saved.write_text("")  # the save's first step, as a poll saw it
    half = _files(tmp_path)
    saved.write_text((SOLUTIONS / "luong_attention.py").read_text())  # its second
    whole = _files(tmp_path)
    assert whole != half
    assert _settled(tmp_path, half, 0.01) == whole
