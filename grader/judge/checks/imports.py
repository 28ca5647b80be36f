"""Check no_torch: a NumPy problem imports no torch, directly or through another module."""
from __future__ import annotations

from ..context import Failed
from ..registry import Check, register
from ...draw.scenarios import Case


def group_imports(problem, seed):
    """One import check, run by the grader in a fresh, sandboxed interpreter (grader/run/probe.py), not by a worker."""
    return [Case("imports/fresh", "imports", {}, {}, {"args": []}, reference=False)]


def check_no_torch(ctx):
    for case in ctx.of("imports"):
        modules = ctx.result(case)["modules"]
        if modules:
            raise Failed(f"importing {ctx.problem.id}.py in a fresh Python imports {', '.join(modules[:3])}: this "
                         "problem is NumPy only; remove every torch import (also those of modules it imports)",
                         symptom="imports_torch")


register(Check("no_torch", "imports no torch (checked in a fresh Python)", {"imports": group_imports}, check_no_torch,
               runs_in_grader=True, names=("imports_torch",), hooks=lambda p, _: {"arrays": True}))  # every call takes and returns NumPy arrays
