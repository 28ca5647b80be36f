"""Memory measured from outside a worker: a memory cgroup per worker, made, filled and read by the grader.

The kernel charges every page a process touches (tensors, NumPy arrays, tmpfs files, page cache) to the
cgroup the process is in, whatever Python does; the worker cannot see the cgroup's files (not mounted in
bubblewrap, root's alone in the process sandbox), so nothing it runs can reset or hide what is read here.

A worker is placed in its `home` group before its first batch is sent (before any learner code runs).
`open_window()` then moves every process of the worker into a fresh group, whose peak starts at zero: the
calls sent next are measured alone, and what the worker already held stays charged to the groups before
(`held`). Pages stay charged where they were first touched, in both cgroup versions.

Layouts: cgroup v1's memory controller (`/sys/fs/cgroup/memory`, as on hybrid hosts), or cgroup v2 with the
memory controller enabled for a subtree we may write (`memory.peak`, Linux 5.19). Neither (not root, a
container without a writable cgroup tree): `reason()` says why, and the memory checks fall back to what
the worker measures itself (docs/security.md says what holds then).
"""
from __future__ import annotations

import functools
import itertools
import os
import time
from dataclasses import dataclass

V1 = "/sys/fs/cgroup/memory"
V2 = "/sys/fs/cgroup"
_names = itertools.count()


@dataclass(frozen=True)
class Layout:
    root: str  # our own directory, made once per grader process
    usage: str  # file names: current charge, and peak charge since the group was made
    peak: str


@functools.lru_cache(maxsize=1)
def _layout() -> Layout | str:
    """Where our groups go, or why there is nowhere."""
    if os.environ.get("ATTNKIT_CGROUPS") == "off":
        return "turned off by ATTNKIT_CGROUPS=off"
    candidates = []
    if os.path.isfile(f"{V1}/memory.max_usage_in_bytes"):
        candidates.append((V1, "memory.usage_in_bytes", "memory.max_usage_in_bytes"))
    if os.path.isfile(f"{V2}/cgroup.controllers"):
        candidates.append((V2, "memory.current", "memory.peak"))
    if not candidates:
        return "no memory cgroup is mounted"
    why = "no writable memory cgroup"
    for base, usage, peak in candidates:
        root = f"{base}/attnkit-{os.getpid()}"
        try:
            _remove_stale(base)
            os.makedirs(root, exist_ok=True)
            if base == V2:
                _enable_memory(base, root)
            layout = Layout(root, usage, peak)
            probe = _make(layout)
            ok = os.path.isfile(f"{probe}/{peak}")
            _remove(probe)
            if ok:
                import atexit

                atexit.register(_remove, root)
                return layout
            why = f"{peak} is missing (kernel too old)"
        except OSError as exc:
            why = f"cannot write {base} ({exc.strerror or exc})"
        _remove(root)
    return why


def _remove_stale(base: str) -> None:
    """Groups left by a grader that was killed (atexit never ran): removed once their processes are gone."""
    for entry in os.listdir(base):
        pid = entry.removeprefix("attnkit-")
        if entry.startswith("attnkit-") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _remove(f"{base}/{entry}", 0.0)


def _enable_memory(base: str, root: str) -> None:
    """cgroup v2: the memory controller must be enabled in the parent's and our subtree_control."""
    for parent in (base, root):
        with open(f"{parent}/cgroup.subtree_control") as f:
            if "memory" in f.read().split():
                continue
        with open(f"{parent}/cgroup.subtree_control", "w") as f:
            f.write("+memory")


def reason() -> str | None:
    """None where the grader can measure workers from outside, else why not (for the report)."""
    layout = _layout()
    return layout if isinstance(layout, str) else None


def _make(layout: Layout) -> str:
    path = f"{layout.root}/g{next(_names)}"
    os.mkdir(path)
    return path


def _read(path: str) -> int:
    with open(path) as f:
        return int(f.read().split()[0])


def _procs(group: str) -> list[int]:
    try:
        with open(f"{group}/cgroup.procs") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _move(pid: int, group: str) -> None:
    with open(f"{group}/cgroup.procs", "w") as f:
        f.write(str(pid))


def _remove(path: str, wait: float = 2.0) -> None:
    """rmdir a group once its processes are gone (a killed process leaves its group a moment later)."""
    end = time.monotonic() + wait
    while True:
        try:
            for child in os.listdir(path):
                if os.path.isdir(f"{path}/{child}"):
                    _remove(f"{path}/{child}", max(0.0, end - time.monotonic()))
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                return
            time.sleep(0.02)


@dataclass
class Window:
    """One measured stretch: the bytes the worker held when it began, and the peak of what it touched since."""

    held: int
    peak: int | None = None


class Memory:
    """One worker's groups: `home` from before its first batch, then one per window. `limit`: bytes each group may
    hold (the worker's memory limit, for all its processes together: a process limit alone lets a worker that forks
    hold that much per process); the kernel kills the worker's processes past it (`oom_killed` then says so)."""

    def __init__(self, limit: int | None = None):
        layout = _layout()
        if isinstance(layout, str):
            raise OSError(layout)
        self.layout, self.limit, self.window = layout, limit, None
        self.groups = [self._limited(_make(layout))]

    def _limited(self, group: str) -> str:
        """The group with the worker's limit set, swap included where the kernel accounts it (no limit: as it is)."""
        if self.limit is None:
            return group
        files = (("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if self.layout.peak.startswith("memory.max_")
                 else ("memory.max", "memory.swap.max"))
        for name, value in zip(files, (self.limit, self.limit if files[0] == "memory.limit_in_bytes" else 0)):
            if os.path.exists(f"{group}/{name}"):
                with open(f"{group}/{name}", "w") as f:
                    f.write(str(value))
        return group

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the worker for going past its limit."""
        for g in self.groups:
            for name, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
                try:
                    with open(f"{g}/{name}") as f:
                        counts = dict(line.split()[:2] for line in f if len(line.split()) >= 2)
                    if int(counts.get(key, 0)) > 0:
                        return True
                except (OSError, ValueError):
                    continue
        return False

    def place(self, pid: int) -> None:
        """Put the worker in its home group (before it runs any learner code)."""
        _move(pid, self.groups[0])

    def open_window(self) -> None:
        """Move every process of the worker into a fresh group; what it touches from now on is measured alone."""
        new = self._limited(_make(self.layout))
        for _ in range(20):  # a process forked meanwhile lands in the old group: move until none is left
            left = [p for g in self.groups for p in _procs(g)]
            if not left:
                break
            for p in left:
                try:
                    _move(p, new)
                except OSError:  # it ended meanwhile
                    pass
        held = sum(_read(f"{g}/{self.layout.usage}") for g in self.groups)
        self.groups.append(new)
        self.window = Window(held)

    def close_window(self) -> Window | None:
        """The window's measurement, read once its calls are answered (None if none was opened)."""
        window, self.window = self.window, None
        if window is not None:
            try:
                window.peak = _read(f"{self.groups[-1]}/{self.layout.peak}")
            except (OSError, ValueError):
                window.peak = None
        return window

    def close(self) -> None:
        """Remove the groups (after the worker's processes were killed)."""
        for g in reversed(self.groups):
            _remove(g)
