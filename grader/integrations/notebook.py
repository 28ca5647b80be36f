"""What the notebooks call: quick checks (within the time per problem), the full grading of a
problem, nbgrader's graded cell of a problem (and the per-check cells of older courses), and a heatmap. The learner's code is taken from the cells marked
`# attnkit: <problem>` (the last run of each), written as modules to a private temporary
directory and graded like any directory; the hidden checks stay in this package.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ..problems import get
from .quick import QuickCheckTimeout, bounded_quick_checks

_REPORTS: dict = {}


class CheckFailed(AssertionError):
    """A graded check failed: the message is the grader's, with no hidden code around it."""

    def _render_traceback_(self) -> list[str]:
        """IPython shows these lines instead of a traceback: the check's name and message, no grader frames."""
        lines = str(self).splitlines() or [""]
        return [f"{type(self).__name__}: {lines[0]}", *lines[1:]]


def _graded_outside() -> bool:
    """Under `nbgrader autograde` with attnkit's course configuration: the points come from grader/integrations/nbgrade.py."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde" and os.environ.get("ATTNKIT_OUTSIDE_KERNEL") == "1"


def start() -> None:
    """Start the grading workers' server now, so that it loads torch while the notebook runs (not when the
    kernel does no grading: a server left running would hold up the kernel's shutdown)."""
    if _graded_outside():
        return
    from ..run.forkserver import warm_up

    warm_up()


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    if shell is None:
        raise RuntimeError("attnkit's notebook helpers run inside Jupyter (IPython)")
    return shell


def _cells(pid: str) -> dict[str, str]:
    """The last run source of each cell this problem needs (itself and what it imports)."""
    history = _shell().history_manager.input_hist_raw
    out = {}
    for dep in get(pid).requires + (pid,):
        tag = f"# attnkit: {dep} "
        found = [src for src in history if src.startswith(tag)]
        if not found:
            raise CheckFailed(f"run the cell that starts with `# attnkit: {dep}` first (it holds your {dep})")
        out[dep] = found[-1]
    return out


def report(pid: str):
    """The grading report of this problem for the code as last run (graded once per version)."""
    cells = _cells(pid)
    key = hashlib.sha256(repr(sorted(cells.items())).encode()).hexdigest()
    if key not in _REPORTS:
        with tempfile.TemporaryDirectory(prefix="attnkit-notebook-") as directory:  # gone once graded
            _REPORTS[key] = grade_cells(pid, cells, Path(directory))
    return _REPORTS[key]


def grade_cells(pid: str, cells: dict[str, str], directory: Path, stop_server: bool = True, sandbox: bool | None = None):
    """Grade the implementation cells of a problem ({problem: cell source}, itself and what it imports),
    written as modules into `directory`; then, in a kernel, stop the workers' server (no child may outlive
    the grading: the kernel would wait for it at shutdown)."""
    from ..grading import grade

    for dep, source in cells.items():
        header = "".join(f"from .{r} import {get(r).symbol}\n" for r in get(dep).requires)
        (directory / f"{dep}.py").write_text(header + source)
    try:
        return grade(directory, [pid], sandbox=sandbox)
    finally:
        if stop_server:
            from ..run.forkserver import stop
            from ..run.jail_process import stop as stop_sandboxes

            stop()
            stop_sandboxes()


def check(pid: str, cid: str) -> None:
    """One graded check (an nbgrader test cell): passes silently, or raises with the grader's message.
    Under `nbgrader autograde` with attnkit's course configuration the points are computed outside this
    kernel (grader/integrations/nbgrade.py), which rewrites this cell's output: grading here too would only cost time.
    Without that configuration (its flag unset) the kernel grades, as before."""
    if _graded_outside():
        print(f"{pid}::{cid}: graded outside the kernel by nbgrader's attnkit step")
        return
    from ..report.feedback import for_check

    problem = report(pid).problems[0]
    result = next(c for c in problem.checks if c.id == cid)
    if result.status == "skipped":
        print(f"{pid}::{cid} skipped: {result.message}")
        return
    if result.status != "passed":  # a mistake's block under the first check it explains (cells in check order)
        raise CheckFailed(f"attnkit check {pid}::{cid} failed (0/{result.max_score:g} points)\n"
                          f"{for_check(problem, result)}") from None
    print(f"{pid}::{cid} passed ({result.score:g}/{result.max_score:g} points)")


def graded_text(pid: str, report) -> tuple[str, float]:
    """(what a graded cell shows, its points) for `pid` in `report`: each CPU check's line, a failing one with the
    grader's message; the points of the CPU checks that passed (nbgrader's cell is worth theirs: CUDA checks are
    never part of it, whatever the grading machine has)."""
    from ..judge.checks import CHECKS
    from ..report.feedback import for_check

    lines, score = [], 0.0
    for c in report.problem(pid).checks:
        if c.id not in CHECKS or CHECKS[c.id].needs_cuda:
            continue
        if c.status == "passed":
            score += c.score
            lines.append(f"{pid}::{c.id} passed ({c.score:g}/{c.max_score:g} points)")
        elif c.status == "skipped":
            lines.append(f"{pid}::{c.id} skipped: {c.message}")
        else:
            lines.append(f"{pid}::{c.id} failed (0/{c.max_score:g} points)\n{for_check(report.problem(pid), c)}")
    return "\n".join(lines), score


def graded(pid: str) -> float | None:
    """The graded cell of a problem (nbgrader): every CPU check's result, and the points as the cell's value, which
    nbgrader takes as partial credit. Under `nbgrader autograde` with attnkit's course configuration the points are
    computed outside this kernel (nbgrade.py), which rewrites this cell's output; here it only says so."""
    if _graded_outside():
        print(f"{pid}: graded outside the kernel by nbgrader's attnkit step")
        return None
    text, score = graded_text(pid, report(pid))
    print(text)
    return score


def grade_here(pid: str) -> None:
    """The same table and messages as `attnkit grade`, for this problem."""
    from ..report.summary import failures, table

    rep = report(pid)
    print(table(rep))
    details = failures(rep)
    if details:
        print("\nWhat to fix:\n" + details)


def quick_check(pid: str) -> None:
    """Shapes and weight sums of the code in this notebook on one small fixed example, within the time per problem."""
    problem = get(pid)
    target = _shell().user_ns.get(problem.symbol)
    if target is None:
        raise CheckFailed(f"`{problem.symbol}` is not defined: run the cell that starts with `# attnkit: {pid}`")
    failed = []
    try:
        results = bounded_quick_checks(problem, target)
    except QuickCheckTimeout as stopped:
        raise CheckFailed(str(stopped)) from None
    for what, why in results:
        print(f"{'ok ' if why is None else 'FAIL'} {what}" + (f": {why}" if why else ""))
        failed += [f"{what}: {why}"] if why else []
    if failed:
        raise CheckFailed("quick check failed: " + failed[0]) from None


def show_weights(pid: str):
    """Heatmap of the weights on the fixed example; the reference's beside them once the problem passes."""
    if os.environ.get("NBGRADER_EXECUTION"):  # nbgrader's documented flag: skip ungraded, costly cells
        print("(the heatmap is drawn when you run the notebook yourself, not while nbgrader grades it)")
        return None
    import matplotlib.pyplot as plt
    import torch

    from ..judge.reference import reference
    from .public import run

    problem = get(pid)
    variant = problem.variants[0]
    target = _shell().user_ns.get(problem.symbol)
    panels = []
    try:
        panels.append(("your weights", run(problem, target, variant)[problem.weights_index]))
    except Exception as exc:  # noqa: BLE001
        print(f"your {problem.symbol} raised {type(exc).__name__}: {exc}")
        return None
    passed = report(pid).problems[0].status == "passed"
    if passed:
        panels.append(("reference", run(problem, reference(problem), variant)[problem.weights_index]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.2), squeeze=False)
    for ax, (title, w) in zip(axes[0], panels):
        m = w.detach().to(torch.float64)
        while m.dim() > 2:  # first batch row (and head)
            m = m[0]
        m = m[None] if m.dim() == 1 else m  # one decoder step: a single row
        im = ax.imshow(m.numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set(title=title, xlabel="key j", ylabel="query i")
        fig.colorbar(im, ax=ax, shrink=0.8)
    if not passed:
        print("the reference's weights appear here once your implementation passes")
    plt.show()
    return fig
