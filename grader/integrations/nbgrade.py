"""nbgrader's autograde, with attnkit's points computed outside the student's kernel, by code no student's cell
could have changed.

nbgrader runs a notebook's cells, the student's and the graded check cells, in one kernel: a student's cell can
replace `attnkit.integrations.notebook.check` (or anything it calls) and every check cell then passes. So the
points come from two steps of nbgrader's own process (the course's nbgrader_config.py adds them; `configure`):

- `TakeSubmission`, the last step of nbgrader's sanitizing (before anything runs): takes each notebook as handed in
  (nbgrader has put its locked cells back), remembers its implementation cells (`# attnkit: <problem>`) and check
  cells. Its first call loads, before any student's cell runs, all the code attnkit's grading will run
  (integrity.preload), and from then on lets nbgrader's process import only files unchanged since it started
  (import_guard.Guard); it warns where attnkit's install is writable by the kernel's user.
- `GradeOutsideKernel`, right after nbgrader's Execute step: grades the implementation cells taken before the
  execution with the sandboxed workers, like any submission, and rewrites the output of every graded cell
  (`graded("<problem>")`) from that result: each check's line (a failing one with its message), and the points of
  the checks that passed as the cell's value, which nbgrader takes as partial credit. (A course made by an older
  attnkit has one cell per check, `check("<problem>", "<check>")`: an error output where it fails, nbgrader's 0.) What the kernel printed there is discarded. Before it returns, it compares
  every file Python could run code from (attnkit's, each directory on sys.path, nbgrader's configuration) with
  their record taken when nbgrader loaded the configuration (integrity.Snapshot): if any changed, a student's cell
  may have written it, and the notebook is refused with an autograder error instead of graded.

docs/nbgrader.md says which setups are safe and how to make the install read-only.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Enum, Unicode

from . import import_guard, integrity
from ..run.inbox import clean

GRADED = re.compile(r'^graded\("(\w+)"\)$', re.M)  # a problem's graded cell (notebooks.py)
CHECK = re.compile(r'^check\("(\w+)", "(\w+)"\)$', re.M)  # one check's cell, in courses made by attnkit before 0.2
TAG = re.compile(r"^# attnkit: (\w+) ")
DOCS = "docs/nbgrader.md in attnkit's repository"

FROM_SOURCE = sys.pycache_prefix == integrity.NO_BYTECODE
"""Whether the course's configuration imported this module with bytecode caches off (as `attnkit course init` writes
it): a cache a student's cell planted in an earlier run is then never run by nbgrader."""
SNAPSHOT = integrity.Snapshot.take()
"""The files Python could run code from, as they are when nbgrader loads the course's configuration: before any
student's cell runs."""

_lock = threading.Lock()
_ready: dict = {}  # "done": True once prepared; "error": the IntegrityError every later notebook gets
_submitted: dict = {}  # (assignment, student, notebook) -> the notebook's cells as handed in


def configure(c) -> None:
    """Add attnkit's two steps to nbgrader autograde's configuration `c` (the course's nbgrader_config.py calls it)."""
    from nbgrader.converters.autograde import Autograde

    traits = Autograde.class_traits()
    sanitize = list(traits["sanitize_preprocessors"].default())
    steps = list(traits["autograde_preprocessors"].default())
    c.Autograde.sanitize_preprocessors = sanitize + [TakeSubmission]  # last: nbgrader has restored its locked cells
    c.Autograde.autograde_preprocessors = steps[:1] + [GradeOutsideKernel] + steps[1:]  # right after Execute
    os.environ["ATTNKIT_OUTSIDE_KERNEL"] = "1"  # set only once the steps are in: the kernel then skips its own grading


class AttnkitStep(Preprocessor):
    """What both of attnkit's steps share: their settings (`c.AttnkitStep.<name>` in nbgrader_config.py)."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled
    writable_install = Enum(("warn", "refuse"), "warn", help=(
        "What to do where attnkit's install (its folder, bytecode caches, or a site-packages directory on sys.path) "
        "is writable by the user the kernel runs as: 'warn' in the autograde output, or 'refuse' to grade.")
    ).tag(config=True)
    kernel_user = Unicode("", help=(
        "The user nbgrader's kernel runs as, where it is not nbgrader's own (a kernelspec that changes user): "
        "the writable-install check is made for that user.")).tag(config=True)

    def prepare(self) -> None:
        """Once per process, at the first notebook's sanitizing, before any student's cell has run."""
        with _lock:
            if _ready.get("done"):
                return
            now = integrity.Snapshot.take(SNAPSHOT.roots)
            changed = SNAPSHOT.changes(now)
            if changed:
                raise integrity.IntegrityError(_changed_message("before the first notebook ran", changed))
            import_guard.guard(SNAPSHOT)
            integrity.preload()
            self._check_install()
            from ..run.jail import decide
            from ..run.jail_process import warm_up

            decide(True)  # a clear error, before any work, where bubblewrap is unusable
            warm_up(repeat=True)  # a sandbox imports torch while the first notebook runs
            _ready["done"] = True

    def _check_install(self) -> None:
        user = self.kernel_user or _me()
        found = integrity.writable(integrity.install_paths(SNAPSHOT), self.kernel_user or None)
        lines = []
        if found:
            shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
            lines.append(
                f"attnkit's install is writable by {user}, the user nbgrader's kernel runs as: {shown}. A student's "
                f"cell could change the code that grades it. attnkit's step grades with code it loaded before any "
                f"student's cell ran and refuses a notebook when these files changed meanwhile, but a student's "
                f"cell can still write whatever {user} can (the gradebook, the course's files). Safe: an install "
                f"the kernel's user cannot write (installed by root or another user, non-editable; or "
                f"`chmod -R a-w` on it), and a kernel that runs as another user; see {DOCS}.")
        if not FROM_SOURCE:
            lines.append(f"nbgrader_config.py imports attnkit's step with bytecode caches on: write it again with "
                         f"`attnkit course init` (or as {DOCS} shows), so that a planted cache is never run.")
        for line in lines:
            if self.writable_install == "refuse":
                raise integrity.IntegrityError(line + " (AttnkitStep.writable_install = 'refuse')")
            self.log.warning("attnkit: WARNING: %s", line)


class TakeSubmission(AttnkitStep):
    """nbgrader's last sanitizing step: the notebook as handed in (locked cells restored), before any cell runs."""

    def preprocess(self, nb, resources):
        self.prepare()
        _submitted[_key(resources)] = _cells(nb)
        return nb, resources


class GradeOutsideKernel(AttnkitStep):
    """Rewrite each attnkit check cell's output from a grading done here, outside the kernel."""

    def preprocess(self, nb, resources):
        if not _ready.get("done"):
            raise integrity.IntegrityError(
                "attnkit's TakeSubmission step did not run before nbgrader executed this notebook, so nothing "
                "ensures the grader's code was loaded before the student's cells ran: put "
                "`from attnkit.integrations.nbgrade import configure; configure(c)` in nbgrader_config.py "
                f"instead of adding GradeOutsideKernel alone (`attnkit course init` writes it; see {DOCS})")
        where = f"{resources['nbgrader']['student']}'s {resources['nbgrader']['notebook']}"
        submitted = _submitted.pop(_key(resources), None)
        if submitted is None or submitted != _cells(nb):
            raise integrity.IntegrityError(
                f"attnkit refuses to grade {where}: the notebook nbgrader executed is not the one it took from "
                f"the submission (it was changed on disk between nbgrader's two passes)")
        try:
            outputs = _grade(submitted)
        except BaseException:
            self._verify(where)  # a changed file explains the failure better than its traceback
            raise
        self._verify(where)
        for i, cell in enumerate(nb.cells):
            if i in outputs:
                cell.outputs = outputs[i]
                for out in cell.outputs:  # a graded cell's value: nbgrader reads it as the partial credit
                    if out.output_type == "execute_result":
                        out.execution_count = cell.get("execution_count")
        return nb, resources

    def _verify(self, where: str) -> None:
        """Every file Python could run code from is as it was when nbgrader loaded its configuration."""
        changed = SNAPSHOT.changes(integrity.Snapshot.take(SNAPSHOT.roots))
        if changed:
            raise integrity.IntegrityError(_changed_message(f"once {where} was graded", changed))


def _changed_message(when: str, changed: list[str]) -> str:
    return ("attnkit refuses to grade: files that attnkit's grading or Python itself may run changed since nbgrader "
            f"started (found {when}):\n  " + "\n  ".join(changed) + "\nA student's cell may have written them: "
            "they are writable by the user nbgrader's kernel runs as. No grade from this process can be trusted: "
            f"reinstall attnkit read-only ({DOCS}), then run nbgrader autograde again.")


def _me() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return f"uid {os.geteuid()}"


def _key(resources) -> tuple:
    meta = resources["nbgrader"]
    return meta["assignment"], meta["student"], meta["notebook"]


def _cells(nb) -> list[tuple]:
    """What grading depends on in each cell: its type, source and nbgrader metadata (not outputs, not timings)."""
    return [(c.cell_type, c.source, json.dumps(c.get("metadata", {}).get("nbgrader"), sort_keys=True))
            for c in nb.cells]


def _grade(cells: list[tuple]) -> dict[int, list]:
    """{cell index: its outputs} for every check cell, from a grading of the implementation cells."""
    from ..problems import ORDER, get
    from .notebook import grade_cells
    from ..run.jail import decide

    decide(True)
    impl = {}
    for kind, source, _ in cells:
        m = TAG.match(source) if kind == "code" else None
        if m and m.group(1) in ORDER:
            impl[m.group(1)] = source  # the last one wins, as in the kernel
    reports: dict = {}
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="attnkit-nbgrader-") as tmp:
        for i, (kind, source, _) in enumerate(cells):
            m = (GRADED.search(source) or CHECK.search(source)) if kind == "code" else None
            if not m or m.group(1) not in ORDER:
                continue
            pid, cid = m.group(1), (m.group(2) if m.re is CHECK else None)
            if pid not in reports:
                needed = {d: impl.get(d) for d in (*get(pid).requires, pid)}
                if any(v is None for v in needed.values()):
                    reports[pid] = None
                else:
                    directory = Path(tmp) / pid
                    directory.mkdir()
                    # students' code: always inside bubblewrap (sandbox=True refuses without it); the spare
                    # sandboxes are reused from one notebook to the next
                    reports[pid] = grade_cells(pid, needed, directory, stop_server=False, sandbox=True)
            outputs[i] = _outputs(pid, cid, reports[pid])
    return outputs


def _outputs(pid: str, cid: str | None, report) -> list:
    """The outputs of a graded cell (`cid` None: the problem's, partial credit as its value) or of one check's."""
    if report is None:
        return [_error(f"attnkit {pid}: the notebook has no cell starting with `# attnkit: {pid}`")]
    if cid is None:
        from .notebook import graded_text

        text, score = graded_text(pid, report)
        return [nbformat.v4.new_output("stream", name="stdout", text=clean(text, 20000) + "\n"),
                nbformat.v4.new_output("execute_result", data={"text/plain": f"{score:g}"}, execution_count=None)]
    problem = report.problems[0]
    result = next((c for c in problem.checks if c.id == cid), None)
    if result is None:
        return [_error(f"attnkit check {pid}::{cid}: no such check")]
    if result.status == "passed":
        return [nbformat.v4.new_output("stream", name="stdout",
                                       text=f"{pid}::{cid} passed ({result.score:g}/{result.max_score:g} points)\n")]
    if result.status == "skipped":
        return [nbformat.v4.new_output("stream", name="stdout", text=f"{pid}::{cid} skipped: {result.message}\n")]
    from ..report.feedback import for_check  # a mistake's block once: under the first check cell it explains

    return [_error(f"attnkit check {pid}::{cid} failed (0/{result.max_score:g} points)\n{for_check(problem, result)}")]


def _error(message: str):
    lines = clean(message, 6000).splitlines() or [""]
    return nbformat.v4.new_output("error", ename="CheckFailed", evalue=lines[0], traceback=lines)
