"""Check no_torch: a NumPy problem imports no torch, directly or through another module."""
from __future__ import annotations

from ..context import Failed
from ..registry import Check, register
from ...draw.scenarios import Case


def group_imports(problem, seed):
    """One import check, run by the grader in a fresh, sandboxed interpreter (grader/run/probe.py), not by a worker."""
    return [Case("imports/fresh", "imports", {}, {}, {"args": []}, reference=False)]


def _answer(problem, cases, submission):
    """The import, in a fresh sandboxed interpreter (run/probe.py), in a thread of its own while the workers run."""
    from concurrent.futures import ThreadPoolExecutor

    from ...run.probe import fresh_import

    pool = ThreadPoolExecutor(len(cases) or 1)
    futures = {key: pool.submit(fresh_import, str(submission.impl), problem.id, submission.limits, submission.timeout,
                                submission.jailed) for key in cases}
    pool.shutdown(wait=False)  # the futures run on; grading collects them after the workers
    return lambda: {key: future.result() for key, future in futures.items()}


def check_no_torch(ctx):
    for case in ctx.of("imports"):
        modules = ctx.result(case).extra["modules"]
        if modules:
            raise Failed(f"importing {ctx.problem.id}.py in a fresh Python imports {', '.join(modules[:3])}: this "
                         "problem is NumPy only; remove every torch import (also those of modules it imports)",
                         symptom="imports_torch")


register(Check("no_torch", "imports no torch (checked in a fresh Python)", {"imports": group_imports}, check_no_torch,
               answer=_answer, names=("imports_torch",), hooks=lambda p, _: {"arrays": True}))  # every call takes and returns NumPy arrays
