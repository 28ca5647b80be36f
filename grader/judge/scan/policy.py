"""What a problem's contract refuses: what the worker enforces, and which findings fail the problem."""
from __future__ import annotations

from .capabilities import ESCAPES, C, Finding
from .files import scan_submission
from .names import LAZY


def no_autograd(problem) -> bool:
    """The problem returns gradients computed by hand: its calls refuse autograd (draw/scenarios.py)."""
    return bool(problem.returns) and all(out.role == "gradient" for out in problem.returns)


def memory_bound(problem) -> bool:
    """A check of the problem measures memory in the worker (its `enforces`)."""
    from ..registry import loaded

    return any(loaded()[c].enforces for c in problem.points if c in loaded())


def enforced(problem) -> list[str]:
    """What of the problem's contract the worker enforces with torch's modes, in words ([] for nothing)."""
    from ..registry import loaded

    checks = loaded()
    by_checks = [checks[c].enforces for c in problem.points if c in checks and checks[c].enforces]
    return (["banned calls"] if problem.banned else []) + by_checks + (
        ["no automatic differentiation"] if no_autograd(problem) else [])


def _bans(problem, name: str) -> bool:
    return any(name == b or (b.endswith("*") and name.startswith(b[:-1])) for b in problem.banned)


def refused(problem, finding: Finding) -> bool:
    """Does the problem's contract refuse what the finding uses?"""
    cap = finding.capability
    if cap in ESCAPES:
        return bool(enforced(problem))
    if cap is C.AUTOGRAD:
        return no_autograd(problem)
    if cap is C.FLEX_ATTENTION:
        return _bans(problem, "flex_attention")
    if cap is C.BANNED_CALL:
        return finding.banned is not None and _bans(problem, finding.banned)
    if cap is C.NUMPY_BRIDGE:
        return memory_bound(problem)
    return False


def lazy_imports(findings) -> list[str]:
    """The private modules of torch to import before a worker's memory is counted, for a source that names a public
    part of torch importing them on its first call (names.LAZY); [] for a scan that failed (its text)."""
    if isinstance(findings, str):
        return []
    return sorted({m for f in findings if f.capability is C.LAZY_TORCH for m in LAZY[f.name]})


def scan_problem(impl, problem) -> list[Finding]:
    return scan_submission(impl, problem.id, problem.banned)
