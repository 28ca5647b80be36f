"""Why a problem was not started, in the grader's own words: for Gradescope's students and the class report.

The reason a result carries comes from the worker (the learner's process could write any text there), so it only
chooses among the sentences here: an exception's message, its file and line never show (they could carry the hidden
inputs the worker held while importing), and its type shows only where it is one of the builtin types in RAISED.
"""
from __future__ import annotations

import re

RAISED = frozenset((  # builtin exception types a not-started line may name: the learner's own class names never show
    "AssertionError", "AttributeError", "FileNotFoundError", "ImportError", "IndentationError", "IndexError",
    "KeyError", "MemoryError", "ModuleNotFoundError", "NameError", "NotImplementedError", "OSError", "RecursionError",
    "RuntimeError", "SyntaxError", "SystemExit", "TabError", "TypeError", "UnicodeDecodeError", "ValueError",
    "ZeroDivisionError",
))
UNTOUCHED = ("stub", "missing")
"""The kinds that mean the learner has not begun the problem; the others (an import that failed, ...) mean they did
and it broke before any check could run."""


def kind(pid: str, message: str) -> str:
    """One of stub, missing, no_symbol, sandbox, output, import, unloadable: which of the grader's reasons applies."""
    from ..problems import get

    reason = str(message).split("\n", 1)[0].removeprefix("not started: ")
    failed = f"importing {pid}.py failed: "
    if reason == f"{pid}.py raises NotImplementedError: still a stub, fill it in":
        return "stub"
    if reason == f"{pid}.py not found in the submission":
        return "missing"
    if reason == f"{pid}.py defines no `{get(pid).symbol}`":
        return "no_symbol"
    if reason.startswith("the grader could not sandbox this submission"):
        return "sandbox"
    if reason == failed + "it printed more than the output limit allows (--output-limit)":
        return "output"
    if reason.startswith(failed):
        return "import"
    return "unloadable"


def raised(pid: str, message: str) -> str:
    """The builtin exception type an import raised, where the reason names one of RAISED; else "an exception"."""
    reason = str(message).split("\n", 1)[0].removeprefix("not started: ")
    m = re.match(r"([A-Za-z_]\w*)(?=:|$| \()", reason[len(f"importing {pid}.py failed: "):])
    return m.group(1) if m and m.group(1) in RAISED else "an exception"


def sentence(pid: str, message: str) -> str:
    """Why `pid` was not started, addressed to its author, in one of the grader's own sentences."""
    from ..problems import get

    found = kind(pid, message)
    if found == "stub":
        return f"{pid}.py is still the stub (it raises NotImplementedError): fill it in"
    if found == "missing":
        return f"{pid}.py is not in your submission"
    if found == "no_symbol":
        return f"{pid}.py defines no `{get(pid).symbol}`"
    if found == "sandbox":
        return "the grader could not prepare your submission (too large, or too many files?)"
    if found == "output":
        return f"importing {pid}.py printed more than the output limit allows"
    if found == "import":
        return (f"your module {pid}.py raised {raised(pid, message)} on import (its message and line are left out "
                "here; run the public checks to see them)")
    return f"{pid}.py could not be loaded (run the public checks to see why)"
