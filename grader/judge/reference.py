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


def reference_like(problem, text: str, name: str, module: str, hooks_of=None):
    """A module of the reference package made from `text` (a catalogued mistake's variant, a mutant), imported as the
    reference is: within the worker hooks' import context of `hooks_of` (default: the problem's; Triton's interpreter),
    its source readable under the file name `name` (inspect reads it: triton.jit does), as `attnkit_reference.<module>`
    so that it imports the references beside it."""
    import linecache
    import types

    reference(problem)  # registers the reference package, whose siblings the module imports
    made = types.ModuleType(f"{PACKAGE}.{module}")
    made.__package__ = PACKAGE
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    with importing(problem_hooks(hooks_of or problem)):
        exec(compile(text, name, "exec"), made.__dict__)
    return made
