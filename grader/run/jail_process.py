"""The parent's side of one submission's bubblewrap sandbox (jail.py): start it, hand it its uid, its
workers and its submission, learn when a worker exits, kill one, and kill the namespace at the end.

A sandbox can be started before its submission is known (`warm_up`: its server imports torch while
the caller does other work); it is still used for one submission only. Everything the sandbox says
is untrusted: small messages read without blocking, a strict schema, and an exit report only ever
explains a failure of the submission's own problem.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import tempfile
import threading
import time
from multiprocessing.connection import Connection

from ..files import remove_tree
from .inbox import Malformed, json_line
from .jail import Sandbox, command, python
from .sandbox import UID_BASE, copy_submission, jail_worker_uids, kill_all, readable_tree, scratch_dir

_spare: "Jail | None" = None
_repeat = False
_registered = False
_lock = threading.Lock()


class Jail:
    """One bwrap running `jail_server`, waiting for the submission it will grade."""

    def __init__(self):
        self.outer, self.exits, self.refused = scratch_dir(), {}, None  # private to the grader's user on the host;
        self.scratch = os.path.join(self.outer, "copy")  # the copy inside it, readable by the workers' own uids
        os.mkdir(self.scratch, 0o755)
        self.worker_uids, self.conns, self.logs = [], [], []
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.errors = tempfile.TemporaryFile()  # bwrap's own complaints, for the grader's error message
        argv = command(self.scratch) + python(f"from {__package__}.jail_server import main; main({theirs.fileno()})")
        try:
            self.box = _launch(argv, theirs.fileno(), self.errors)
        finally:
            theirs.close()

    @property
    def proc(self):
        return self.box.proc

    def assign(self, impl_dir: str, targets: list[tuple[str, str]], limits) -> None:
        """Copy the submission in (sizes checked before reading), then send the server its uid and workers."""
        try:
            copy_submission(impl_dir, limits, self.scratch)
        except OSError as exc:  # too large, too many files: every problem fails with this reason
            self.refused = f"the grader could not sandbox this submission ({exc})"
            return
        self.box.started()
        if os.geteuid() == 0:  # the copy stays root's, readable by every worker's uid and written by none
            readable_tree(self.scratch)
        theirs = []
        for module, *_ in targets:
            mine, child = socket.socketpair()
            fd, log = tempfile.mkstemp(prefix=f"attnkit-{module}-", suffix=".log")
            self.logs.append(log)
            self.conns.append(Connection(mine.detach()))
            theirs += [child.detach(), fd]
        root = os.geteuid() == 0  # each worker's uid chosen here, from the sandbox's pid, never said from inside
        self.worker_uids = jail_worker_uids(UID_BASE + self.proc.pid, len(targets)) if root else []
        go = {"worker_uids": self.worker_uids, "limits": dataclasses.asdict(limits), "workers": [list(t) for t in targets]}
        try:
            socket.send_fds(self.control, [json.dumps(go).encode()], theirs)
        except OSError:
            pass  # the server is gone: each worker's connection reads as closed, and says so
        finally:
            for fd in theirs:
                os.close(fd)

    def host_pid(self, hello: dict) -> int:
        """A worker's pid as seen here, from the pid it said in its hello (before any of its learner code ran)."""
        return self.box.host_pid(hello.get("pid"))

    def poll(self) -> None:
        """Take the exit reports available now; anything malformed ends the sandbox (its problems fail)."""
        while True:
            try:
                data = self.control.recv(4096, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                return
            try:
                msg = json_line(data)
                ok = isinstance(msg, dict) and set(msg) == {"exit", "code"} and all(type(v) is int for v in msg.values())
            except Malformed:
                ok = False
            if not ok:
                self.kill()
                return
            self.exits[msg["exit"]] = msg["code"]

    def alive(self, i: int) -> bool:
        self.poll()
        return i not in self.exits and self.proc.poll() is None

    def wait(self, i: int, timeout: float) -> None:
        end = time.monotonic() + timeout
        while self.alive(i) and time.monotonic() < end:
            time.sleep(0.01)

    def exitcode(self, i: int):
        if i in self.exits:
            return self.exits[i]
        return None if self.proc.poll() is None else -signal.SIGKILL

    def kill_worker(self, i: int) -> None:
        try:
            self.control.send(json.dumps({"kill": i}).encode())
        except OSError:
            pass

    def bwrap_said(self) -> str:
        """What bwrap itself printed (its errors: a missing path, a refused namespace), capped."""
        self.errors.seek(0)
        return self.errors.read(2000).decode("utf-8", "replace").strip()

    def kill(self) -> None:
        """Kill the namespace (its first process: the kernel kills every process left in it), then, as root,
        anything still running under its workers' uids."""
        self.box.kill()
        for uid in self.worker_uids:
            kill_all(uid, None)

    def close(self) -> None:
        self.kill()
        self.control.close()
        self.errors.close()
        for log in self.logs:
            try:
                os.unlink(log)
            except OSError:
                pass
        remove_tree(self.outer)


class JailedProcess:
    """Worker i of a Jail, with the subset of multiprocessing.Process the pool uses."""

    def __init__(self, jail: Jail, i: int):
        self.jail, self.i = jail, i

    def is_alive(self) -> bool:
        return self.jail.alive(self.i)

    def join(self, timeout: float | None = None) -> None:
        self.jail.wait(self.i, 5.0 if timeout is None else timeout)

    @property
    def exitcode(self):
        return self.jail.exitcode(self.i)

    def kill(self) -> None:
        self.jail.kill_worker(self.i)

    def said(self) -> str:
        return self.jail.bwrap_said()


def warm_up(repeat: bool = False) -> None:
    """Start a spare sandbox now, whose server imports torch meanwhile. `repeat`: after each use, start the
    next one at once (a batch, `watch`, a test suite); otherwise a spare serves the next grading only."""
    global _spare, _repeat, _registered
    with _lock:
        _repeat = _repeat or repeat
        if _spare is None:
            _spare = Jail()
        if not _registered:  # a caller that never stops it (nbgrader's step): the spare ends with the process
            atexit.register(stop)
            _registered = True


def take(impl_dir: str, targets: list[tuple[str, str]], limits) -> Jail:
    """A sandbox for this submission: the spare if there is one, else a new one."""
    global _spare
    with _lock:
        jail, _spare = _spare, None
    if jail is None or jail.proc.poll() is not None:
        if jail is not None:
            jail.close()
        jail = Jail()
    if _repeat:
        warm_up()
    jail.assign(impl_dir, targets, limits)
    return jail


def stop() -> None:
    """Kill the spare (at the end of a command): nothing outlives it."""
    global _spare, _repeat
    # A spare may be starting in another thread, which holds the lock until bwrap answers; the command must end all
    # the same (Ctrl-C reaches bwrap too): past a few seconds the spare is left to --die-with-parent, which ends it
    # with this process.
    if not _lock.acquire(timeout=STOP_WAIT):
        return
    try:
        jail, _spare, _repeat = _spare, None, False
    finally:
        _lock.release()
    if jail is not None:
        jail.close()


STOP_WAIT = 5.0
"""Seconds stop() waits for a spare that is starting."""


_requests: "queue.Queue | None" = None
_launcher_lock = threading.Lock()


def _launch(argv, fd: int, errors) -> Sandbox:
    """Start bwrap from one long-lived thread: --die-with-parent kills a sandbox when the *thread* that
    started it ends (prctl's parent-death signal), and a batch's grading threads come and go."""
    global _requests
    with _launcher_lock:
        if _requests is None:
            _requests = queue.Queue()
            threading.Thread(target=_launcher, args=(_requests,), daemon=True, name="attnkit-sandboxes").start()
    done: queue.Queue = queue.Queue()
    _requests.put((argv, fd, errors, done))
    result = done.get()
    if isinstance(result, BaseException):
        raise result
    return result


def _launcher(requests: queue.Queue) -> None:
    while True:
        argv, fd, errors, done = requests.get()
        try:
            done.put(Sandbox(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=errors, stderr=errors))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done.put(exc)

