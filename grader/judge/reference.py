"""The reference solution of a problem, loaded in the grader's process (never in a worker)."""
from __future__ import annotations

from .. import REFERENCE_DIR
from ..run.loader import load_symbol


def reference(problem):
    """The reference's callable (function or class) for `problem`, from REFERENCE_DIR as package attnkit_reference."""
    return load_symbol(REFERENCE_DIR, problem.id, problem.symbol, "attnkit_reference")
