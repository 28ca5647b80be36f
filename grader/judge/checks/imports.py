"""Check no_torch: a NumPy problem imports no torch, directly or through another module, at import or when called: the
module is imported, and its function called once, in a fresh sandboxed interpreter where torch is absent (its folder
empty, in bubblewrap or as root) or watched (grader/run/probe.py). A function that gets its results right in its
worker, where torch is loaded, but raises or returns other values there, needs torch."""
from __future__ import annotations

import torch

from ..compare import mismatch, tolerance
from ..context import Failed
from ...draw.describe import call_text
from ..registry import Check, register
from ...draw.groups import each_case, form
from ...draw.scenarios import Case, base_call, make_mask


def group_imports(problem, seed):
    """The import and one call of config 0 (its expected values the reference's), run by the grader in a fresh,
    sandboxed interpreter, not by a worker."""
    for vi, variant, ci, cfg, gen in each_case(problem, seed):
        kind = form(problem, "batch")
        call = base_call(problem, cfg, variant, gen("imports"), make_mask(problem, kind, cfg, gen("imports", "lens"), low=1))
        return [Case("imports/fresh", "imports", variant, cfg, call, lens=kind)]
    return []


def _plain(value):
    """An argument as the probe takes it: a tensor as {"array": nested lists, "dtype": name}, anything else as it is."""
    if isinstance(value, torch.Tensor):
        return {"array": value.tolist(), "dtype": str(value.dtype).removeprefix("torch.")}
    return value


def _answer(problem, cases, submission):
    """The import and call, in a fresh sandboxed interpreter (run/probe.py), in a thread of its own while the workers
    run."""
    from concurrent.futures import ThreadPoolExecutor

    from ...run.probe import fresh_import

    pool = ThreadPoolExecutor(len(cases) or 1)
    futures = {key: pool.submit(fresh_import, str(submission.impl), problem.id, submission.limits, submission.timeout,
                                submission.jailed, problem.symbol, [_plain(a) for a in case.call["args"]])
               for key, case in cases.items()}
    pool.shutdown(wait=False)  # the futures run on; grading collects them after the workers
    return lambda: {key: future.result() for key, future in futures.items()}


def check_no_torch(ctx):
    for case in ctx.of("imports"):
        extra = ctx.result(case).extra
        modules = extra["modules"]
        if modules:
            doing = (f"calling {call_text(ctx.problem, case)}" if extra.get("when") == "call"
                     else f"importing {ctx.problem.id}.py")
            raise Failed(f"{doing} in a fresh Python imports {', '.join(modules[:3])}: this problem is NumPy only; "
                         "remove every torch import (also those of modules it imports, and inside functions)",
                         symptom="imports_torch")
        called = extra.get("called")
        if called is None or not _right_in_workers(ctx):
            continue  # what goes wrong in the workers too is for the other checks to say
        said = _differs(called, ctx.expected(case))
        if said:
            raise Failed(f"called in a fresh Python without torch, {call_text(ctx.problem, case)} {said}, where its "
                         "worker (with torch loaded) gets the right results: it uses torch when called. This problem "
                         "is NumPy only", symptom="imports_torch")


def _right_in_workers(ctx) -> bool:
    from .parity_symptoms import _right

    base = ctx.of("base")
    return bool(base) and all(_right(ctx, c) for c in base)


def _differs(called: dict, expected) -> str | None:
    """How the probe's call differs from the expected outputs, in words (None where it does not)."""
    if "error" in called:
        return f"raised {called['error']}"
    got = called.get("outputs") or []
    if len(got) != len(expected):
        return f"returned {len(got)} outputs, not {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        try:
            t = torch.tensor(g["data"], dtype=torch.float64).reshape(g["shape"])
        except (RuntimeError, TypeError, ValueError):
            return f"returned an output {i} that is no array of numbers"
        problem = mismatch(f"output {i}", t, e.to(torch.float64), tolerance("float64"))
        if problem:
            return f"returned other values ({problem})"
    return None


register(Check("no_torch", "imports no torch (checked in a fresh Python)", {"imports": group_imports}, check_no_torch,
               answer=_answer, names=("imports_torch",), hooks=lambda p, _: {"arrays": True}))  # every call takes and returns NumPy arrays
