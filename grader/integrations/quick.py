"""The notebooks' quick checks within the grader's time per problem: a learner's endless loop in a notebook costs that
long (30 s by default), in their own kernel and in nbgrader's autograde, never the notebook's whole cell timeout."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from ..defaults import DEFAULT_TIMEOUT


class QuickCheckTimeout(BaseException):
    """The quick check ran past its time: a BaseException, so that an `except Exception` around the learner's call
    (quick_checks has one per example) does not swallow it."""


@contextmanager
def time_limit(seconds: float):
    """Stop the code inside after `seconds` (SIGALRM in the kernel's main thread, where cells run; elsewhere no
    limit), raising QuickCheckTimeout; the previous handler and timer are put back."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def stop(signum, frame):
        raise QuickCheckTimeout()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def bounded_quick_checks(problem, target, seconds: float = DEFAULT_TIMEOUT) -> list[tuple[str, str | None]]:
    """quick_checks, stopped after `seconds` (the grader's time per problem): a learner's endless loop costs the
    kernel (and nbgrader's autograde) that long, not the notebook's whole cell timeout."""
    from .public import quick_checks

    try:
        with time_limit(seconds):
            return quick_checks(problem, target)
    except QuickCheckTimeout:
        raise QuickCheckTimeout(f"quick check stopped after {seconds:g} s (the time limit per problem): your "
                                f"`{problem.symbol}` may loop forever, or be far too slow") from None
