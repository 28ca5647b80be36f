"""nbgrader's autograde, with attnkit's points computed outside the student's kernel.

nbgrader runs a notebook's cells, the student's and the graded check cells, in one kernel: a
student's cell can replace `attnkit.integrations.notebook.check` (or anything it calls) and every check cell
then passes. This preprocessor runs in nbgrader's own process after its Execute step: it takes
the implementation cells (`# attnkit: <problem>`) from the executed notebook, grades them with
the sandboxed workers like any submission, and rewrites the output of every check cell
(`check("<problem>", "<check>")`) from that result: an error output where the check fails (nbgrader
gives 0 points), a plain line where it passes. What the kernel printed there is discarded.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from ..run.inbox import clean

CHECK = re.compile(r'^check\("(\w+)", "(\w+)"\)$', re.M)
TAG = re.compile(r"^# attnkit: (\w+) ")


class GradeOutsideKernel(Preprocessor):
    """Rewrite each attnkit check cell's output from a grading done here, outside the kernel."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled

    def preprocess(self, nb, resources):
        from .notebook import grade_cells
        from ..problems import ORDER, get

        cells = {}
        for cell in nb.cells:
            m = TAG.match(cell.source) if cell.cell_type == "code" else None
            if m and m.group(1) in ORDER:
                cells[m.group(1)] = cell.source  # the last one wins, as in the kernel
        from ..run.jail import decide
        from ..run.jail_process import warm_up

        decide(True)  # a clear error, before any work, where bubblewrap is unusable
        warm_up(repeat=True)  # students' code: always inside bubblewrap (sandbox=True below refuses without it)
        reports: dict = {}
        with tempfile.TemporaryDirectory(prefix="attnkit-nbgrader-") as tmp:
            for cell in nb.cells:
                m = CHECK.search(cell.source) if cell.cell_type == "code" else None
                if not m or m.group(1) not in ORDER:
                    continue
                pid, cid = m.groups()
                if pid not in reports:
                    needed = {d: cells.get(d) for d in (*get(pid).requires, pid)}
                    if any(v is None for v in needed.values()):
                        reports[pid] = None
                    else:
                        directory = Path(tmp) / pid
                        directory.mkdir()
                        reports[pid] = grade_cells(pid, needed, directory, stop_server=False, sandbox=True)  # reused per notebook
                cell.outputs = _outputs(pid, cid, reports[pid])
        return nb, resources


def _outputs(pid: str, cid: str, report) -> list:
    if report is None:
        return [_error(f"attnkit check {pid}::{cid}: the notebook has no cell starting with `# attnkit: {pid}`")]
    result = next((c for c in report.problems[0].checks if c.id == cid), None)
    if result is None:
        return [_error(f"attnkit check {pid}::{cid}: no such check")]
    if result.status == "passed":
        return [nbformat.v4.new_output("stream", name="stdout",
                                       text=f"{pid}::{cid} passed ({result.score:g}/{result.max_score:g} points)\n")]
    if result.status == "skipped":
        return [nbformat.v4.new_output("stream", name="stdout", text=f"{pid}::{cid} skipped: {result.message}\n")]
    return [_error(f"attnkit check {pid}::{cid} failed (0/{result.max_score:g} points)\n{result.message}")]


def _error(message: str):
    lines = clean(message, 6000).splitlines() or [""]
    return nbformat.v4.new_output("error", ename="CheckFailed", evalue=lines[0], traceback=lines)
