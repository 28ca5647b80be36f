"""The grader's handle on one worker process: feeding it calls, reading what it reports, noticing hangs,
crashes and exits, and ending it with everything it started."""
from __future__ import annotations

import functools
import os
import signal
import tempfile
import threading
import time

from .forkserver import bare_main
from .hooks import grace
from ..files import remove_tree
from .sandbox import enter as enter_sandbox, kill_all, scratch_dir, worker_uid
from .inbox import FrameReader, Malformed, clean, message
from .wire import dumps
from ..results import Trouble
from .window import Measured, memory_groups
from .worker import serve


STARTUP = 120.0  # seconds for a worker to say hello (a sandbox importing torch on a loaded machine)


QUEUED_GRANTS = 3
"""How many timeouts more a worker's deadline may move by its wait for a CPU: the other workers of a grading on two
cores (one of them spinning) can keep a correct worker waiting longer than its own timeout; a submission that starves
its own main thread with processes of its own gains at most this much."""


class Worker(Measured):
    """One problem's worker process and everything it has reported."""

    def __init__(self, conn, proc, log_path: str, timeout: float, cleanup=None):
        """`proc`: a started multiprocessing.Process, or a jail_process.JailedProcess; `cleanup()` runs at close."""
        self.conn, self.proc, self.log_path, self.cleanup = conn, proc, log_path, cleanup
        self.reader = FrameReader(self.conn.fileno()) if conn is not None else None
        self.timeout, self.deadline = timeout, time.monotonic() + STARTUP  # the clock starts at hello
        self.hello = self.loaded = None
        self.got_loaded = False
        self.results: dict[str, dict] = {}
        self.pending: list[str] = []  # keys sent and not answered, in order
        self.failure: str | None = None  # why the worker stopped answering
        self.end: Trouble | None = None  # how it stopped, as the grader saw it (never read from any message)
        self.fault = False  # it stopped before its hello: before any learner code ran, so never the learner's doing
        self.stop_sent = False
        self.sending = threading.Lock()
        self.host: int | None = None  # the worker's pid as seen here (found once, from its hello inside bubblewrap)
        self.queued: float | None = None  # its wait for a CPU when its clock last started or moved (None: unreadable)
        self.granted = 0.0  # seconds the deadline has moved for that wait
        self.graces: dict[str, float] = {}  # key -> seconds of the grader's own work in that call (Hook.grace), due once
        self.graced = 0.0  # seconds the deadline has moved for them
        self.measured()

    @classmethod
    def refused(cls, why: str, timeout: float) -> "Worker":
        """A worker that never started: the submission could not be prepared (too large, too many files)."""
        w = cls(None, None, "", timeout)
        w.hello, w.loaded, w.got_loaded = {"cuda": False}, why, True
        return w

    @classmethod
    def forked(cls, ctx, impl_dir: str, module: str, symbol: str, timeout: float, limits, hide,
               preload: tuple = ()) -> "Worker":
        """A worker from the forkserver, sandboxed by sandbox.enter (no bubblewrap); `preload`: packages it imports
        before (worker.serve)."""
        conn, child = ctx.Pipe()
        fd, log_path = tempfile.mkstemp(prefix=f"attnkit-{module}-", suffix=".log")
        os.close(fd)
        scratch = scratch_dir()  # removed in close(), whatever happened to the worker
        enter = functools.partial(enter_sandbox, impl_dir, limits, hide, scratch)
        proc = ctx.Process(target=serve, args=(child, log_path, module, symbol, enter, preload), daemon=True)
        with bare_main():
            proc.start()
        child.close()
        memory = memory_groups(limits.memory_mb)
        if memory is not None and not preload:
            try:
                memory.place(proc.pid)  # it waits for its first batch, not sent yet: no learner code has run
            except OSError:
                memory.close()
                memory = None

        def cleanup():
            kill_all(worker_uid(proc.pid), proc.pid)  # identities from what we started, never from the worker
            try:
                os.unlink(log_path)
            except OSError:
                pass
            remove_tree(scratch)

        w = cls(conn, proc, log_path, timeout, cleanup)
        w.memory = memory
        if memory is not None and preload:  # placed at its hello, after its imports (the grader's, never counted),
            w.locate = lambda hello: proc.pid  # its first batch sent only then (Pool.submit_all)
        return w

    @property
    def busy(self) -> bool:
        return self.failure is None and (self.hello is None or not self.got_loaded or bool(self.pending))

    def submit(self, calls: list[dict]) -> None:
        """Send a batch; the worker reads it at once (the first one before importing the learner's code). While a
        measured window is still due, the batch waits until it is closed (window.Measured.after_window): a batch on
        CUDA loads the CUDA runtime, hundreds of MB the window would count as the learner's."""
        if self.held or self.in_window:
            self.after_window(calls)
            return
        if self.expect(calls):
            try:
                self.send(dumps(calls))
            except OSError:
                self._died()

    def expect(self, calls: list[dict]) -> bool:
        """Count the calls as sent (pending); False where the worker takes no more."""
        if self.failure is None and self.loaded is None:
            self.pending += [c["key"] for c in calls]
            self.graces.update({c["key"]: seconds for c in calls if (seconds := grace(c))})
            return True
        return False

    def send(self, data: bytes) -> None:
        with self.sending:  # one frame at a time: Pool.submit_all sends from a thread of its own
            self.conn.send_bytes(data)

    def receive(self) -> None:
        """Read what the worker has sent so far (never blocking on a partial frame) and take each message."""
        try:
            frames = self.reader.read()
        except Malformed as exc:
            self._stop(f"the worker sent something that is not a result ({exc})", Trouble.HOSTILE)
            return
        except OSError:
            self._died()
            return
        for frame in frames:
            try:
                self._take(message(frame))
            except Malformed as exc:
                self._stop(f"the worker sent something that is not a result ({exc})", Trouble.HOSTILE)
                return
            if self.failure:
                return
        if self.reader.eof:
            self._died()

    def _take(self, msg: dict) -> None:
        if ("hello" in msg and self.hello is not None) or ("loaded" in msg and self.got_loaded):
            # said once, by the worker's own code before any learner code runs: a second one is the learner's
            # code writing on the connection (a hello would start the clock again)
            raise Malformed(f"a second {next(iter(msg))!r} message")
        if "hello" in msg:
            self.hello = msg["hello"]
            self.deadline = time.monotonic() + self.timeout
            self.queued, self.granted = self._queued(), 0.0
            if self.deferred is not None:
                self._place_and_send()
        elif "loaded" in msg:
            self.loaded, self.got_loaded = msg["loaded"], True
            if self.loaded:
                self.pending = []
        elif "key" in msg:
            if msg["key"] not in self.pending:
                raise Malformed(f"a result for a call it was not sent ({msg['key']!r:.60})")
            self.results[msg["key"]] = msg["result"]
            self.pending.remove(msg["key"])
            self._window_answered()

    def check_deadline(self, now: float) -> None:
        if self.busy and now > self.deadline:
            if self.hello is not None and (self._grant_grace() or self._grant_queued()):
                return
            if self.hello is None:
                self._stop(f"the worker did not start within {STARTUP:g} s{self._said()}", Trouble.ERROR)
            else:
                more = f" and {self.graced:g} s for the grader's own work" if self.graced else ""
                self._stop(f"timed out after {self.timeout:g} s{more}{self._where()} (an endless loop, or far too slow)",
                           Trouble.TIMEOUT)

    def _grant_grace(self) -> bool:
        """Move the deadline by the grader's own work in the call now running (the first one unanswered: results come
        in order), once per call; True where it moved."""
        more = self.graces.pop(self.pending[0], 0.0) if self.got_loaded and self.pending else 0.0
        self.deadline, self.graced = self.deadline + more, self.graced + more
        return more > 0

    def _grant_queued(self) -> bool:
        """Move the deadline past the time the worker waited for a CPU since its clock started (runnable but not run:
        other workers on too few cores, the grader's doing, never the learner's), up to QUEUED_GRANTS timeouts more in all; True
        where it moved. Read by the grader from /proc (the kernel's scheduler statistics), never from the worker."""
        queued = self._queued()
        if queued is None or self.queued is None:
            return False
        more = min(queued - self.queued, QUEUED_GRANTS * self.timeout - self.granted)
        if more < 0.25:
            return False
        self.deadline += more
        self.queued, self.granted = queued, self.granted + more
        return True

    def _queued(self) -> float | None:
        """Seconds the worker's main thread has spent runnable but waiting for a CPU (/proc/<pid>/schedstat's second
        field); None where that cannot be read."""
        try:
            if self.host is None:  # found once (inside bubblewrap: a search of /proc)
                self.host = self.locate(self.hello) if self.locate is not None else self.proc.pid
            with open(f"/proc/{int(self.host)}/schedstat") as f:
                return int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError, TypeError, AttributeError, LookupError):
            return None

    def _said(self) -> str:
        said = getattr(self.proc, "said", lambda: "")()
        return f" (the sandbox said: {clean(said, 600)})" if said else ""

    def _died(self) -> None:
        self.proc.join(5)
        code = self.proc.exitcode
        if self.hello is None:
            self._stop(f"the worker process ended before it started (status {code}){self._said()}{self._log_tail()}",
                       Trouble.ERROR)
            return
        if self.memory is not None and self.memory.limit and self.memory.oom_killed():
            why = (f"was killed by the kernel for holding more than its memory limit ({self.memory.limit >> 20} MB, all "
                   "its processes together)")
        elif code is not None and code < 0:
            try:
                why = f"crashed with {signal.Signals(-code).name}"
            except ValueError:
                why = f"was killed by signal {-code}"
        else:
            why = f"exited with status {code} (sys.exit or os._exit in the learner's code?)"
        self._stop(f"the worker process {why}{self._where()}{self._log_tail()}", Trouble.CRASH)

    def _where(self) -> str:
        if not self.got_loaded:
            return " while importing the module"
        return f" while running call {self.pending[0]}" if self.pending else ""

    def _stop(self, why: str, end: "Trouble") -> None:
        self.failure, self.fault, self.end = why, self.hello is None, end
        self.close()

    def _log_tail(self, limit: int = 600) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                text = f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its last output:\n{clean(text)}" if text else ""

    def send_stop(self) -> None:
        """Ask the worker to exit (it does once its current batch is answered)."""
        if not self.stop_sent:
            self.stop_sent = True
            try:
                self.send(dumps(None))
            except OSError:
                pass

    def close(self) -> None:
        """Stop the worker and every process it started; nothing of it outlives the grading."""
        if self.proc is None:
            return
        if self.proc.is_alive():
            self.send_stop()
            self.proc.join(0.5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.reader.close()
        self.conn.close()
        if self.cleanup:
            self.cleanup()
        if self.memory is not None:
            self.memory.close()

