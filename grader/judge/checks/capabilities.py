"""Check capabilities: the source uses nothing the problem's contract refuses (judge/scan/), where the
contract is enforced inside the worker by torch's modes (banned calls, a memory bound, autograd refused), which code
of the learner's could switch off. The grader reads the source (never runs it for this check); every finding is
listed in the reports either way, this check fails on those the contract refuses."""
from __future__ import annotations

from ..context import Failed
from ..registry import Check, register
from ..scan import enforced, no_autograd, refused
from ...draw.scenarios import Case

MAX_SHOWN = 8


def group_source(problem, seed):
    """One reading of the submission's source, by the grader itself (grading.py), not by a worker."""
    return [Case("source/scan", "source", {}, {}, {"args": []}, reference=False)]


def _answer(problem, cases, submission):
    """The reading of the source, made before any of the submission ran (grading.py): its findings, or, where the
    reader failed, a grader error (the check then fails: the source it read is the learner's)."""
    scan = submission.scan
    if isinstance(scan, str):
        result = {"ok": False, "grader_error": True, "error": {"text": f"reading the source: {scan}"}}
    else:
        result = {"ok": True, "findings": list(scan)}
    return lambda: {key: dict(result) for key in cases}


def check_capabilities(ctx):
    for case in ctx.of("source"):
        bad = [f for f in ctx.result(case).extra["findings"] if refused(ctx.problem, f)]
        if bad:
            lines = [f"  {f.describe()}" for f in bad[:MAX_SHOWN]]
            more = [f"  ... and {len(bad) - MAX_SHOWN} more"] if len(bad) > MAX_SHOWN else []
            raise Failed(
                "the source uses what grading this problem refuses (docs/security.md, \"What is found\", lists each "
                "kind):\n" + "\n".join(lines + more) + "\n"
                f"This problem's contract ({'; '.join(enforced(ctx.problem))}) is enforced while your code runs; code "
                "that could switch that enforcement off, hide work from it, or that the grader cannot read is refused "
                "here (the grader reads your source for this check, without running it). Remove these uses.")


register(Check("capabilities", "uses only what the contract allows (source read)", {"source": group_source},
               check_capabilities, diagnose=False, answer=_answer,
               # the contract's refusals, on every call of the problem (run/hooks/ban.py, run/hooks/no_autograd.py)
               hooks=lambda p, _: {**({"ban": list(p.banned)} if p.banned else {}),
                                   **({"no_autograd": True} if no_autograd(p) else {})},
               needs=lambda p: None if enforced(p) else "a contract the worker enforces (banned calls, a memory bound, "
               "or gradients by hand)"))
