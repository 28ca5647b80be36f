"""How glibc's malloc hands out and gives back large blocks, set per process (mallopt; elsewhere than glibc, nothing
is changed). Two policies:

`steady()`, for a worker whose memory is measured: a fixed mmap threshold (MMAP_THRESHOLD) and a heap top given back
above 128 kB, so that the process's pages follow its live tensors. A worker is forked from a server that imported
torch, whose heap is full of freed holes: an allocation that reuses one copies (or faults in) its pages, which count
as the worker's new memory; glibc otherwise raises its threshold after large frees (up to 32 MB), after which large
blocks reuse those holes and keep the high-water mark of fragmentation, not of what was alive.

`roomy()`, for a process whose memory nobody measures (the grader's command, a worker with no memory call): blocks up
to 64 MB come from the heap and are reused, and the heap's free top is kept up to 256 MB, instead of each large block
being mapped afresh and given back at once, every page of it faulted in again by the next (a page fault costs about
6 us of system time on the machines measured; a full grading run's processes took 580,000 of them).
"""
from __future__ import annotations

MMAP_THRESHOLD = 128 << 10
"""steady()'s fixed threshold. With large blocks always mapped afresh and given back at once, only small allocations
reuse the server's holes (measured: a few MB), where a raised threshold let a chunked solution's 256 kB temporaries
wander through 50 to 100 MB of them."""


def _mallopt(mmap_threshold: int, trim_threshold: int) -> None:
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, mmap_threshold)  # M_MMAP_THRESHOLD: fixed from now on (no longer adjusted upwards)
        libc.mallopt(-1, trim_threshold)  # M_TRIM_THRESHOLD: a free heap top above this is given back
    except (OSError, AttributeError):
        pass


def steady() -> None:
    """A measured worker's memory follows its live tensors (called before any learner code runs)."""
    _mallopt(MMAP_THRESHOLD, 128 << 10)


def roomy() -> None:
    """Freed large blocks are kept for reuse (a process whose memory is not measured)."""
    _mallopt(64 << 20, 256 << 20)
