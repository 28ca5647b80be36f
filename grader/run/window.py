"""The measured part of a worker's handle: its memory cgroups (run/cgroup.py), placed before the learner's code runs,
and the calls measured in a window of their own once every other call is answered."""
from __future__ import annotations

import time

from . import cgroup
from .hooks import outside
from .wire import dumps


def memory_groups(limit_mb: int | None = None) -> "cgroup.Memory | None":
    """A worker's memory groups, where the grader can make them (else its memory is measured inside: docs), limited to
    `limit_mb` for all the worker's processes together."""
    try:
        return cgroup.Memory(limit_mb << 20 if limit_mb else None) if cgroup.reason() is None else None
    except OSError:
        return None


class Measured:
    """Mixed into handle.Worker: what the grader measures around the worker, from outside it."""

    def measured(self) -> None:
        self.memory: cgroup.Memory | None = None  # the worker's memory cgroups, made and read here (run/cgroup.py)
        self.locate = None  # hello -> the worker's pid as seen here, where it is only known then (bubblewrap)
        self.deferred: bytes | None = None  # the first batch, held back until the worker is in its cgroup
        self.held: list[dict] = []  # calls measured in a window of their own, sent once all others are answered
        self.later: list[dict] = []  # calls sent once the window is closed (a CUDA batch)
        self.in_window: list[str] = []  # keys of the calls in the open window; their results get "outside"

    def hold(self, calls: list[dict]) -> None:
        """Calls to measure alone: pending now, sent in a window of their own once every other call is answered."""
        if calls and self.expect(calls):
            self.held = list(calls)

    def after_window(self, calls: list[dict]) -> None:
        """Calls pending now, sent once the measured window is closed."""
        if calls and self.expect(calls):
            self.later += calls

    def _window_answered(self) -> None:
        """After each result: once the window's calls are all answered, the grader's reading goes into their results
        (a field of its own: a worker's result carrying one is refused by the inbox); then the next window, if due."""
        if self.in_window and not set(self.pending) - {c["key"] for c in self.later}:
            window = self.memory.close_window() if self.memory is not None else None
            for key in self.in_window if window is not None else ():  # a window was opened: its reading, or None
                self.results[key]["outside"] = None if window.peak is None else \
                    {"held_kb": window.held >> 10, "peak_kb": window.peak >> 10}
            self.in_window = []
        self._next_window()
        if self.later and not self.held and not self.in_window and not self.failure:
            calls, self.later = self.later, []
            self.deadline = time.monotonic() + self.timeout
            try:
                self.send(dumps(calls))
            except OSError:
                self._died()

    def _next_window(self) -> None:
        """All but the held calls answered: open a measured window (where cgroups serve) and send them."""
        if not self.held or self.failure or self.loaded or len(self.pending) != len(self.held) + len(self.later):
            return  # (counted first: the sets below, built after every answer, cost a worker's calls squared)
        if set(self.pending) - {c["key"] for c in self.later} != {c["key"] for c in self.held}:
            return
        calls, self.held = self.held, []
        self.in_window = [c["key"] for c in calls]
        if self.memory is not None:
            try:
                self.memory.open_window()
            except OSError:
                self.memory.window = None
        if self.memory is not None and self.memory.window is not None:  # measured here, from outside: the worker's
            calls = [outside(c) for c in calls]  # own count is not
        self.deadline = time.monotonic() + self.timeout  # the window's calls get a time limit of their own
        try:
            self.send(dumps(calls))
        except OSError:
            self._died()

    def defer_first(self, data: bytes) -> None:
        """Bubblewrap: the first batch waits until the worker's hello (sent before any learner code) tells where to
        find it, and it is in its cgroup (at once if the hello has come already)."""
        self.deferred = data
        if self.hello is not None:
            self._place_and_send()

    def _place_and_send(self) -> None:
        """Put the worker in its cgroup, by the pid its hello names, then send the first batch."""
        data, self.deferred = self.deferred, None
        try:
            self.memory.place(self.locate(self.hello))
        except (OSError, LookupError, TypeError):
            self.memory.close()
            self.memory = None
        try:
            self.send(data)
        except OSError:
            self._died()
