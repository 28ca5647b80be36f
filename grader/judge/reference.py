"""The reference solution of a problem, loaded in the grader's process (never in a worker)."""
from __future__ import annotations

import sys

from .. import REFERENCE_DIR, solution_path
from ..run.hooks import importing
from ..run.loader import load_package, load_symbol
from .registry import problem_hooks

PACKAGE = "attnkit_reference"


def reference(problem):
    """The reference's callable (function or class) for `problem`, from its solution's folder (the kit's, or an
    extension's), imported as package attnkit_reference: the kit's folder first, so that references import each
    other."""
    path = solution_path(problem.id)
    if PACKAGE not in sys.modules:
        load_package(REFERENCE_DIR, PACKAGE)
    search = sys.modules[PACKAGE].__path__
    if str(path.parent) not in search:
        search.append(str(path.parent))
    with importing(problem_hooks(problem)):  # as a worker would have set up (a kernel imported to be interpreted)
        return load_symbol(path.parent, problem.id, problem.symbol, PACKAGE)
