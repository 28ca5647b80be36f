"""Starting one worker per problem, feeding it calls, and noticing hangs, crashes and exits.

Workers come from a multiprocessing forkserver that preloads torch and the worker code
(grader/run/forkserver.py): each starts in milliseconds with torch loaded, and from a process
that has never held the reference solutions, the hidden inputs' expected values or the
grader's open files.
"""
from __future__ import annotations

import threading
import time
from multiprocessing.connection import wait

from .forkserver import context
from .handle import Worker
from .window import memory_groups
from .sandbox import Limits, hidden_paths
from .wire import dumps


class Pool:
    """One worker per problem; `run_until` reads them until the caller's condition holds or none is busy."""

    def __init__(self, impl_dir: str, targets: dict[str, tuple], timeout: float, limits: Limits | None = None,
                 jailed: bool = False):
        """`jailed`: every worker inside one bubblewrap sandbox for this submission (jail.py); else each
        forked from the forkserver and sandboxed by sandbox.enter."""
        limits = limits or Limits()
        self.senders: list[threading.Thread] = []
        self.workers: dict[str, Worker] = {}
        self.jail = None
        if jailed:
            from .jail_process import JailedProcess, take

            self.jail = take(impl_dir, list(targets.values()), limits)
            for i, pid in enumerate(targets):
                if self.jail.refused:
                    self.workers[pid] = Worker.refused(self.jail.refused, timeout)
                else:
                    w = Worker(self.jail.conns[i], JailedProcess(self.jail, i), self.jail.logs[i], timeout)
                    w.memory, w.locate = memory_groups(limits.memory_mb), self.jail.host_pid
                    self.workers[pid] = w
            return
        ctx, hide = context(), hidden_paths()
        for pid, (module, symbol, *preload) in targets.items():
            self.workers[pid] = Worker.forked(ctx, impl_dir, module, symbol, timeout, limits, hide,
                                              tuple(preload[0]) if preload else ())

    def submit_all(self, batches: dict[str, list[dict]]) -> None:
        """Each named worker's first batch, {problem id: calls} (judge/plan.py's batches, or some of them: called again
        for others as the plan draws them), sent by a thread: a worker drains its pipe only when the
        scheduler lets it, and the grader has its own work meanwhile. The calls count as pending at once; a
        failed send shows as the worker's end of file, read by the grader's own thread. Calls marked `window` are
        held back and measured alone once the others are answered (window.Measured.hold). A worker whose pid is known
        only from its hello (bubblewrap) gets its first batch once it is in its cgroup."""
        frames = []
        for pid, calls in batches.items():
            w = self.workers[pid]
            first = [c for c in calls if not c.get("window")]
            if w.expect(first):
                w.hold([c for c in calls if c.get("window")])
                if w.memory is not None and w.locate is not None:
                    w.defer_first(dumps(first))
                else:
                    frames.append((w, dumps(first)))

        def send_all():
            for w, data in frames:
                try:
                    w.send(data)
                except OSError:
                    pass

        if frames:
            self.senders.append(threading.Thread(target=send_all, name="attnkit-submit", daemon=True))
            self.senders[-1].start()

    def submit_more(self, batches: dict[str, list[dict]]) -> None:
        """A further batch of calls for each named worker (the CUDA checks' once the workers said they see a GPU), sent
        after its first."""
        for pid, calls in batches.items():
            self.workers[pid].submit(calls)

    def wait_hello(self, idle=lambda: False) -> None:
        """Every worker says hello (and whether it sees CUDA) before running any learner code. `idle()` is the
        caller's own work, done while none has (it returns False when none is left): the sandbox's server imports
        torch meanwhile, a second in which the grader computes expected values."""
        self._pump(lambda w: w.failure is None and w.hello is None, idle=idle)

    def run_until(self, done, wake=()) -> None:
        """Read from every busy worker until `done()` holds or none is busy; return early when a connection in
        `wake` has something to read (the caller's own)."""
        self._pump(lambda w: w.busy, done, list(wake))

    def poll(self) -> None:
        """Read what has arrived by now, without waiting (between the grader's own computations, so that no
        worker blocks on a full pipe meanwhile)."""
        active = {w.conn: w for w in self.workers.values() if w.conn is not None and w.failure is None and not w.stop_sent}
        for conn in wait(list(active), timeout=0) if active else ():
            active[conn].receive()

    def release(self, pid: str) -> None:
        """Tell an idle worker to exit now (close() reaps it), so that it ends while the others run."""
        w = self.workers[pid]
        if w.proc is not None and not w.busy and w.failure is None:
            w.send_stop()

    def _pump(self, waiting, done=None, wake=(), idle=lambda: False) -> None:
        while True:
            self.poll()  # what arrived while the grader was busy counts before any deadline is judged
            active = {w.conn: w for w in self.workers.values() if waiting(w)}
            if not active or (done is not None and done()):
                return
            now = time.monotonic()
            for w in active.values():
                w.check_deadline(now)
            active = {c: w for c, w in active.items() if waiting(w)}
            if not active:
                return
            if idle():  # work of the caller's own, between reads
                continue
            left = min(w.deadline for w in active.values()) - now
            wake = [c for c in wake if not c.closed]  # the caller may close one meanwhile (a helper that ended)
            for conn in wait(list(active) + wake, timeout=max(0.01, left)):
                if conn not in active:
                    return
                active[conn].receive()

    def close(self) -> None:
        if any(s.is_alive() for s in self.senders):  # a worker that never read its batch: end it first
            for w in self.workers.values():
                if w.proc is not None and w.busy:
                    w.proc.kill()
        for sender in self.senders:
            sender.join()
        for w in self.workers.values():  # all asked first: they exit side by side
            if w.proc is not None and w.proc.is_alive():
                w.send_stop()
        for w in self.workers.values():
            w.close()
        if self.jail:
            self.jail.close()
