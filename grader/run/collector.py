"""Python's cyclic garbage collector around the imports of torch and the specs.

Importing torch creates hundreds of thousands of objects, and the collector walks them again and again as they
arrive: a fifth of a second of the import's 1.3 s (measured: `python -c "import torch"` 1.45 s, 1.27 s with the
collector off). Every process of a grading run imports torch once (the grader, the sandbox's server or the
forkserver), so each pauses the collector for its imports, then freezes what they loaded (gc.freeze: no later
collection walks it, and a forked worker does not copy its pages by touching its counts) and turns it back on:
from then on cycles are collected as usual, so a long batch or `watch` does not grow.
"""
from __future__ import annotations

import gc


def pause() -> None:
    """Before the imports: no collection while they run."""
    gc.disable()


def settle() -> None:
    """After them: what is loaded is frozen (kept for good, never walked again) and the collector is on again."""
    gc.freeze()
    gc.enable()


def finish() -> None:
    """Before the process ends: settled, so its last collections skip what is frozen, unless Triton's bindings were
    loaded (a kernels problem): nanobind reports each of their objects still alive at exit as a leak, on stderr, so
    then everything is unfrozen and collected (about half a second more)."""
    import sys

    if "triton._C.libtriton" in sys.modules:
        gc.unfreeze()
        gc.enable()
        gc.collect()
    else:
        settle()
